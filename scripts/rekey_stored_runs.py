"""Re-key stored runs after a change of how a run's definition is written (not of what is trained).

For every declared run that is missing, find the stored run of the same name in the same data set whose
definition agrees on everything but the loss's printed form (data hashes, split sizes, model, configuration, loss
class, state names, non-tensor state), and store it again under the new key with the new definition. Runs whose
definitions disagree on anything else are left alone and listed. A re-keyed run keeps its training version and
software record: re-keying changes how a run is named, not what trained it (so it is no more current than before).

    CALIBMED_DATA_DIR=... python scripts/rekey_stored_runs.py [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import course
from helpers.course import suites  # noqa: E402
from helpers.training import run_store
from helpers.utils import atomic

COMPARED = ("dataset", "image_size", "split_sizes", "data", "model", "config")
COMPARED_LOSS = ("class", "state_keys", "extra_state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    notebooks = [p.stem for p in course.list_notebooks() if p.stem in suites.DECLARED_RUNS]
    missing = suites.declared_runs(notebooks, "reference", {})
    for planned in missing:
        folder = run_store.STORED_RUNS_DIR / planned.bundle.name
        new_definition = run_store.run_definition(planned.bundle, planned.model_name, planned.loss, planned.config)
        matches = []
        for path in sorted(folder.glob("*.npz")):
            with np.load(path) as stored:
                meta = json.loads(stored["meta"].tobytes())
                arrays = {name: stored[name] for name in stored.files}
            old = meta["definition"]
            if (
                meta["name"] == planned.name
                and all(old[k] == new_definition[k] for k in COMPARED)
                and all(old["loss"][k] == new_definition["loss"][k] for k in COMPARED_LOSS)
            ):
                matches.append((path, meta, arrays))
        if len(matches) != 1:
            print(f"left alone: {planned.name} ({len(matches)} matching stored runs)")
            continue
        path, meta, arrays = matches[0]
        same_state = meta["definition"]["loss"]["state"] == new_definition["loss"]["state"]
        print(f"{planned.name}: {path.stem} -> {planned.key} (initial loss state identical: {same_state})")
        if args.dry_run:
            continue
        meta.update(
            key=planned.key,
            definition=new_definition,
            rekeyed_from={"key": path.stem, "loss_state_hash": meta["definition"]["loss"]["state"]},
        )
        arrays["meta"] = np.frombuffer(json.dumps(meta, allow_nan=False).encode(), dtype=np.uint8)
        target = folder / f"{planned.key}.npz"
        atomic.write_atomically_with(target, lambda file, arrays=arrays: np.savez_compressed(file, **arrays))
        path.unlink()


if __name__ == "__main__":
    main()
