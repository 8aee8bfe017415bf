"""``python -m helpers.course``: the course runner's command line (:func:`helpers.course.cli.main`)."""

from helpers.course import cli

if __name__ == "__main__":
    cli.main()
