"""Django's command line for Codemojex: ``manage.py`` in a checkout, the
``codemojex`` command of an installed package (``codemojex migrate``,
``codemojex run_scoreworker``, ...), and ``python -m codemojex_site.manage``."""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codemojex_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
