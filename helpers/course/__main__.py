"""``python -m helpers.course``: the course runner's command line (:func:`helpers.course.runner.main`),
with the Ray engine."""

from helpers.course import ray_engine, runner

runner.main(ray_engine=ray_engine)
