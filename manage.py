#!/usr/bin/env python
"""Django's command-line utility for Codemojex (installed: the ``codemojex`` command)."""
from codemojex_site.manage import main

if __name__ == "__main__":
    main()
