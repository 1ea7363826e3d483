import sys

try:  # a Ctrl-C while the CLI itself imports is said as any other, never a traceback (cli.main says the rest)
    from flybench.cli import main
except KeyboardInterrupt:
    print("flybench: interrupted while starting; nothing was done", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
