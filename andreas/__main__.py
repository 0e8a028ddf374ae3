"""``python -m andreas``: the same command as the ``andreas`` console script."""

from andreas.cli import main

if __name__ == "__main__":
    main(prog_name="andreas")
