"""Function sizes from an ELF code object (AMD HSACO or NVIDIA cubin): the code size of each kernel.

The textual ISA has `.size sym, .Lfunc_end0-sym`, a difference the
assembler resolves; the linked object holds the resolved number in its
symbol table. Both vendors' objects are little-endian ELF64, so a small
reader of the section headers and `.symtab` is enough (no binutils needed:
the system `readelf` does not know the AMDGPU machine type anyway).
"""

from __future__ import annotations

import re
import struct

STT_FUNC = 2


def function_sizes(blob: bytes) -> dict[str, int]:
    """{symbol: size in bytes} of every FUNC symbol; empty for anything that is not ELF64 little-endian."""
    if len(blob) < 64 or blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    sizes: dict[str, int] = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 2 or not entsize:  # SHT_SYMTAB
            continue
        strtab = sections[link]
        names = blob[strtab[4]:strtab[4] + strtab[5]]
        for index in range(size // entsize):
            st_name, st_info, _other, _shndx, _value, st_size = struct.unpack_from(
                "<IBBHQQ", blob, offset + index * entsize)
            if st_info & 0xF == STT_FUNC:
                end = names.index(b"\0", st_name)
                sizes[names[st_name:end].decode(errors="replace")] = st_size
    return sizes


_BINARY = re.compile(r'\bbin\s*=\s*"')


def binaries_in_mlir(text: str) -> list[bytes]:
    """The objects embedded in a `gpu.binary` op (MLIR's escaped string: `\\XX` hex bytes, `\\\\`, `\\"`)."""
    found = []
    for match in _BINARY.finditer(text):
        out, i = bytearray(), match.end()
        while i < len(text) and text[i] != '"':
            if text[i] == "\\":
                pair = text[i + 1:i + 3]
                if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
                    out.append(int(pair, 16))
                    i += 3
                    continue
                out += text[i + 1].encode()
                i += 2
                continue
            out += text[i].encode("latin-1", errors="replace")
            i += 1
        found.append(bytes(out))
    return found
