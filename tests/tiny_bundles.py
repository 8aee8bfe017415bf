"""The tiny three-class bundle several test modules train on: one split serves as train, validation and test."""

from helpers.data import DatasetBundle, Split


def three_class_bundle(split: Split, source: str = "generated in the test") -> DatasetBundle:
    """A multi-class bundle named "tiny" (classes a, b, c, 8 px) whose three splits are ``split``."""
    return DatasetBundle(
        name="tiny",
        task="multi-class",
        class_names=["a", "b", "c"],
        train=split,
        val=split,
        test=split,
        source=source,
        licence="none",
        image_size=8,
    )
