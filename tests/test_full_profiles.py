"""Issue 10 (also): every notebook's `full` configuration has never run on a GPU in CI. Build it on the CPU from
the notebook's own PROFILES table (``course.notebook_profiles``: model at its image size, its batch size, learning
rate and schedule, through the course's recipes) and take one real training step with `fit` on a few images."""

from __future__ import annotations

import pytest
import torch
from medmnist import INFO

from helpers import course, data
from helpers.lessons import multilabel_analysis
from helpers.losses import BCE, CrossEntropy
from helpers.training import TrainConfig, models, recipes, train

HANDFUL = 2  # two images: BatchNorm needs more than one value per channel


def handful_bundle(dataset: str, image_size: int) -> data.DatasetBundle:
    """Random uint8 images and labels with the shapes, channels, classes and task of ``dataset``."""
    if dataset == "isic2018":  # the official ISIC 2018 layout: RGB, 7 classes (notebook 12)
        task, channels, class_names = data.MULTI_CLASS, 3, list(data.ISIC_CLASS_NAMES)
    else:
        info = INFO[dataset.removeprefix("synthetic_")]
        task, channels, class_names = data.dataset_task(dataset), int(info["n_channels"]), list(info["label"].values())
    n_classes = len(class_names)
    generator = torch.Generator().manual_seed(0)

    def split(n):
        images = torch.randint(0, 256, (n, channels, image_size, image_size), generator=generator, dtype=torch.uint8)
        if task == data.MULTI_LABEL:
            labels = torch.randint(0, 2, (n, n_classes), generator=generator).float()
        else:
            labels = torch.randint(0, n_classes, (n,), generator=generator)
        return data.Split(images, labels)

    return data.DatasetBundle(
        name=dataset,
        task=task,
        class_names=class_names,
        train=split(HANDFUL),
        val=split(2),
        test=split(2),
        source="random",
        licence="none",
        image_size=image_size,
    )


def training_configs(cfg: course.RunConfig, task: str) -> dict[str, TrainConfig]:
    """The TrainConfigs the notebooks build from ``cfg``: the two recipes (multi-class; the over-fitting one for
    ``overfit_epochs`` where the notebook has them), the multi-label recipe otherwise. CPU only."""
    if task == data.MULTI_LABEL:
        return {
            "multi-label": multilabel_analysis.multilabel_train_config(
                cfg.epochs, cfg.lr, cfg.batch_size, seed=cfg.seed, device="cpu"
            )
        }
    epochs = {"well-regularised": cfg.epochs, "over-fitting": cfg.extra.get("overfit_epochs", cfg.epochs)}
    return {
        recipe: recipes.recipe_config(
            recipe, epochs=n, lr=cfg.lr, batch_size=cfg.batch_size, seed=cfg.seed, device="cpu", progress=False
        )
        for recipe, n in epochs.items()
    }


class OneStepDone(Exception):
    pass


def stop_after_the_first_step(features, targets):
    raise OneStepDone


@pytest.mark.parametrize("notebook", course.list_notebooks(), ids=lambda path: path.stem[:2])
def test_full_profile_builds_and_takes_one_training_step_on_the_cpu(notebook, tmp_path):
    profiles = course.notebook_profiles(notebook.stem)
    cfg = course.configure(
        notebook.stem, profiles, profile="full", device="cpu", results_path=str(tmp_path / "results.json")
    )
    assert cfg.epochs == profiles["full"]["epochs"] and cfg.batch_size == profiles["full"]["batch_size"]
    bundle = handful_bundle(cfg.dataset, cfg.image_size)
    for name, config in training_configs(cfg, bundle.task).items():
        assert config.batch_size == cfg.batch_size and config.epochs >= cfg.epochs
        torch.manual_seed(cfg.seed)
        model = models.build_model(cfg.model, bundle.n_channels, bundle.n_classes, image_size=cfg.image_size)
        before = {k: v.clone() for k, v in model.state_dict().items() if v.is_floating_point()}
        loss = BCE() if bundle.task == data.MULTI_LABEL else CrossEntropy()
        loss.after_step = stop_after_the_first_step  # fit calls it after the optimiser and scheduler step
        with pytest.raises(OneStepDone):
            train.fit(model, loss, bundle, config)
        after = model.state_dict()
        assert all(torch.isfinite(after[k]).all() for k in before), f"{notebook.stem} {name}: non-finite weights"
        assert not torch.equal(after["classifier.weight"], before["classifier.weight"]), (
            f"{notebook.stem} {name}: the step did not change the weights"
        )
