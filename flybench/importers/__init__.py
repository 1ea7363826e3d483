"""Importers: other systems' benchmark results brought into the store, never mistaken for flybench's own.

Every row an importer writes carries `source` (flybench's own asv rows carry
'flybench'), the source's record verbatim, and the source's own verdict, so a
chart or report can always say who measured what and how.
"""
