"""The output and structure rules of helpers.course.output_rules: each rule on a notebook that breaks it and on one
that keeps it, the clean-up (helpers.course.output_cleanup), and every committed notebook against every rule."""

import json
from pathlib import Path

import pytest

from helpers.course import output_cleanup
from helpers.course import output_rules as rules

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / "notebooks").glob("*.ipynb"))


def markdown(text, **metadata):
    return {"cell_type": "markdown", "metadata": metadata, "source": text}


def code(source, outputs=(), tags=(), **metadata):
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags), **metadata},
        "source": source,
        "outputs": list(outputs),
        "execution_count": 1,
    }


def stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def good_notebook():
    """A small notebook that keeps every rule."""
    summary = "This notebook measures something worth measuring, " * 3
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            markdown(f"# 99 · A title\n\n{summary}\n\n**Licences.** DermaMNIST: CC BY-NC 4.0."),
            markdown("Outputs below come from the stored runs of the reference profile."),
            code('profile = "quick"', tags=["parameters", "remove-cell"]),
            code("cfg = course.configure(...)"),
            code(
                "runs = suites.multiclass_runs(cfg, bundle)\ncourse.provenance(cfg, bundle)",
                [
                    stream("epochs: 3/3 in 12 s (training loss=0.5)\n"),
                    stream("6 stored runs · DermaMNIST 28 px · seeds 0–2 · trained deterministically on a GPU\n"),
                ],
            ),
            markdown("## Takeaway\n\n* it works"),
            code("results_file = course.save_results(cfg, results)"),
            code(
                '# Parameters\nresults_path = "../results/reference/99_x.json"\nprofile = "quick"\n',
                tags=["injected-parameters", "remove-cell"],
            ),
            code(
                "course.details(cfg, bundle, results_file=results_file)",
                [
                    stream(
                        "notebook 99_x, profile 'quick'\nsettings this run read: epochs=30, seeds=[0, 1, 2]\n"
                        "source: $CALIBMED_DATA_DIR/dermamnist.npz\nThe file's md5 (a032e8b21d33ac007a130d549262064c) "
                        "differs\n6 stored runs loaded — dermamnist, seeds 0–2, trained deterministically on NVIDIA "
                        "H100 80GB HBM3,\n  training version 0123456789abcdef\nresults written to "
                        "results/reference/99_x.json\ncompute time since configure: 38 s\n"
                    )
                ],
                tags=["expert", "hide-cell"],
                jupyter={"source_hidden": True, "outputs_hidden": True},  # folded, as clean_notebook leaves it
            ),
        ],
    }


def test_a_notebook_that_keeps_every_rule_passes():
    assert {rule: problems for rule, problems in rules.check_notebook(good_notebook()).items() if problems} == {}


BROKEN = {
    "no_progress_bars": lambda nb: nb["cells"][4]["outputs"].append(
        stream("\repochs:  43%|████▎     | 13/30 [07:22<06:37, 23.37s/it, training loss=0.70]", "stderr")
    ),
    "no_absolute_paths": lambda nb: nb["cells"][8]["outputs"].append(
        {
            "output_type": "execute_result",
            "execution_count": 1,
            "metadata": {},
            "data": {"text/plain": "PosixPath('/home/someone/calibmed/runs/results/99_x.json')"},
        }
    ),
    "no_timestamps": lambda nb: nb["cells"][4]["metadata"].update(
        execution={"iopub.execute_input": "2026-11-22T20:37:45.144093Z"}
    ),
    "no_raw_warnings": lambda nb: nb["cells"][4]["outputs"].append(
        stream("helpers/losses/multiclass.py:263: UserWarning: LS+: class accuracies\n", "stderr")
    ),
    "no_long_lines": lambda nb: nb["cells"][4]["outputs"].append(stream("model " + "0.123 [0.100,0.150] " * 8 + "\n")),
    "no_widget_state": lambda nb: nb["metadata"].update(
        widgets={"application/vnd.jupyter.widget-state+json": {"state": {"a": {}}}}
    ),
    "outputs_size": lambda nb: nb["cells"][4]["outputs"].append(
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "A" * (rules.MAX_OUTPUT_BYTES + 1)}}
    ),
    "no_errors": lambda nb: nb["cells"][4]["outputs"].append(
        {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["ValueError: bad"]}
    ),
    "title_summary_licence": lambda nb: nb["cells"][0].update(source="# 99 · A title\n\nShort."),
    "one_parameters_cell": lambda nb: nb["cells"][3]["metadata"].update(tags=["parameters", "remove-cell"]),
    "takeaway_cell": lambda nb: nb["cells"][5].update(source="## Summary\n\n* it works"),
    "main_flow_quiet": lambda nb: nb["cells"][4]["outputs"].append(stream("source: $CALIBMED_DATA_DIR/x.npz\n")),
    "one_provenance_line": lambda nb: nb["cells"][4]["outputs"].append(
        stream("3 stored runs · synthetic chest X-rays (coupled labels) 28 px · seed 0 · trained on a CPU\n")
    ),
    "run_details_folded": lambda nb: nb["cells"][8]["metadata"].update(tags=["hide-cell"]),
    "no_run_folder_injected": lambda nb: nb["cells"][7].update(
        source='# Parameters\nresults_path = "../runs/s5-ref/results/99_x.json"\nprofile = "quick"\n'
    ),
    "solutions_collapsed": lambda nb: nb["cells"].append(code("answer = 42", tags=["solution"])),
    "main_flow_outputs_open": lambda nb: nb["cells"][4]["metadata"].update(
        jupyter={"source_hidden": True, "outputs_hidden": True}
    ),
    "parameters_hidden": lambda nb: nb["cells"][2]["metadata"].update(tags=["parameters"]),
    "main_flow_words": lambda nb: nb["cells"].extend(markdown("word " * 320) for _ in range(8)),
    "main_flow_cells": lambda nb: nb["cells"].append(markdown("word " * (rules.MAX_CELL_WORDS + 1))),
    "no_printed_lists": lambda nb: nb["cells"][4]["outputs"].append(stream("['LS α=0.1 +4.4 [+2.7, +4.9]', 'x']\n")),
    "human_table_headers": lambda nb: nb["cells"][4]["outputs"].append(
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {"text/html": "<table><thead><tr><th>model</th><th>map_per_class (%)</th></tr></thead></table>"},
        }
    ),
}


def test_every_rule_has_a_broken_example():
    assert set(BROKEN) == set(rules.RULES)


@pytest.mark.parametrize("rule", rules.RULES)
def test_each_rule_flags_only_its_own_breakage(rule):
    nb = good_notebook()
    BROKEN[rule](nb)
    failing = {name for name, problems in rules.check_notebook(nb).items() if problems}
    assert failing == {rule}


def test_paths_inside_urls_or_relative_paths_are_not_absolute():
    nb = good_notebook()
    nb["cells"][4]["outputs"].append(stream("see https://doi.org/10.1038/s41597 and runs/results/x.json, 3/4 of it\n"))
    assert rules.no_absolute_paths(nb) == []


def papermill_executed(nb):
    """``nb`` with the metadata papermill and Jupyter write when they execute it on a machine."""
    nb["metadata"]["papermill"] = {
        "default_parameters": {},
        "duration": 67.675272,
        "end_time": "2026-11-22T20:38:40.450939+00:00",
        "environment_variables": {},
        "exception": None,
        "input_path": "/home/someone/calibmed/notebooks/99_x.ipynb",
        "output_path": "runs/ref/notebooks/99_x.ipynb",
        "parameters": {"profile": "quick"},
        "start_time": "2026-11-22T20:37:32.775667+00:00",
        "version": "2.7.0",
    }
    for cell in nb["cells"]:
        cell["metadata"]["papermill"] = {
            "duration": 0.01437,
            "end_time": "2026-11-22T20:37:34.021192+00:00",
            "exception": False,
            "start_time": "2026-11-22T20:37:34.006822+00:00",
            "status": "completed",
        }
        if cell["cell_type"] == "code":
            cell["metadata"]["execution"] = {
                "iopub.execute_input": "2026-11-22T20:37:45.144093Z",
                "iopub.status.busy": "2026-11-22T20:37:45.143748Z",
                "iopub.status.idle": "2026-11-22T20:37:45.969227Z",
                "shell.execute_reply": "2026-11-22T20:37:45.968454Z",
            }
    return nb


def test_paths_and_timestamps_are_found_in_the_metadata_and_sources_too():
    nb = papermill_executed(good_notebook())
    paths = rules.no_absolute_paths(nb)
    assert paths == ["metadata.papermill.input_path: /home/someone/calibmed/notebooks/99_x.ipynb"]
    times = rules.no_timestamps(nb)
    assert "metadata.papermill.start_time: 2026-11-22T20:37:32.775667+00:00" in times
    assert "cells[2].metadata.execution.iopub.execute_input: 2026-11-22T20:37:45.144093Z" in times
    n_code = sum(cell["cell_type"] == "code" for cell in nb["cells"])
    assert len(times) == 2 + 2 * len(nb["cells"]) + 4 * n_code  # notebook, each cell's papermill, code cells' execution
    nb = good_notebook()
    nb["cells"][2]["source"] = ['profile = "quick"\n', 'data_dir = "/srv/data/medmnist"\n']
    nb["cells"][5]["source"] = "## Takeaway\n\n* measured on 2026-11-22 14:03"
    assert rules.no_absolute_paths(nb) == ["cells[2].source: /srv/data/medmnist"]
    assert rules.no_timestamps(nb) == ["cells[5].source: 2026-11-22 14:03"]


def test_image_data_is_not_read_for_paths_or_timestamps():
    nb = good_notebook()
    nb["cells"][4]["outputs"].append(
        {
            "output_type": "display_data",
            "metadata": {"image/png": {"width": 300}},
            "data": {
                "image/png": "iVBORw0KGgo/AAAANSUhEUgAA/AAB9AAAAW+CAYAAAB/ez4l",
                "text/plain": "<Figure size 640x480 with 1 Axes>",
            },
        }
    )
    assert rules.no_absolute_paths(nb) == [] and rules.no_timestamps(nb) == []


def test_injected_values_naming_a_local_folder_are_flagged():
    """Issue 16 item 5: the injected cell of a committed notebook names no folder of one run (runs/…), no absolute
    path and no home folder; a repository-relative published path passes."""
    for value in ("../runs/s5-ref/results/x.json", "runs/x.json", "/home/someone/x.json", "~/x.json"):
        nb = good_notebook()
        nb["cells"][7]["source"] = f'# Parameters\nresults_path = "{value}"\n'
        assert rules.no_run_folder_injected(nb), value
    nb = good_notebook()
    nb["cells"][7]["source"] = "# Parameters\nresults_path = (\n"
    assert "cannot be parsed" in rules.no_run_folder_injected(nb)[0]


def test_publishing_names_the_results_json_in_the_repository_and_hides_the_parameter_cells():
    nb = good_notebook()
    for cell in nb["cells"]:
        cell["metadata"]["tags"] = [t for t in cell["metadata"].get("tags", []) if t != "remove-cell"]
    nb["cells"][7]["source"] = '# Parameters\nresults_path = "../runs/s5-ref/results/99_x.json"\nprofile = "quick"\n'
    cleaned, _ = output_cleanup.clean_notebook(nb)
    assert rules.parameters_hidden(cleaned) == [] and rules.parameters_hidden(nb) != []
    published = output_cleanup.settle_injected_results_path(cleaned, "99_x")
    assert published["cells"][7]["source"] == (
        '# Parameters\nresults_path = "../results/reference/99_x.json"\nprofile = "quick"\n'
    )
    assert rules.check_notebook(published)["no_run_folder_injected"] == []
    assert nb["cells"][7]["source"].count("runs/") == 1  # the input is left as it was
    assert published["cells"][8]["outputs"][0]["text"].count("results written to results/reference/99_x.json\n") == 1
    assert output_cleanup.settle_injected_results_path(published, "99_x") == published


def test_publishing_a_run_made_outside_the_repository_names_the_committed_json_not_the_run_folder():
    """A reference run into /tmp (``course run --out /tmp/fin1``) prints its results path relative to the notebooks
    folder (../../../tmp/fin1/results/…) or absolute: published, every spelling names the committed JSON."""
    for printed in (
        "../../../tmp/fin1/results/99_x.json",
        "/tmp/fin1/results/99_x.json",
        "runs/s5-ref/results/99_x.json",
    ):
        nb = good_notebook()
        nb["cells"][8]["outputs"][0]["text"] = f"results_path='{printed}'\nresults written to {printed}\n"
        published = output_cleanup.settle_injected_results_path(nb, "99_x")
        assert published["cells"][8]["outputs"][0]["text"] == (
            "results_path='results/reference/99_x.json'\nresults written to results/reference/99_x.json\n"
        ), printed
    nb = good_notebook()
    nb["cells"][8]["outputs"][0]["text"] = "other notebook: /tmp/fin1/results/98_y.json\n"
    assert output_cleanup.settle_injected_results_path(nb, "99_x") == nb  # another notebook's path is not this one's


def test_papermills_record_of_the_injected_parameters_names_no_run_folder_either():
    """papermill also records the injected values in metadata.papermill.parameters: publishing left the run's
    folder there (results_path "../runs/ref-s6c/results/...") in every committed notebook."""
    nb = good_notebook()
    nb["cells"][7]["source"] = '# Parameters\nresults_path = "../runs/s5-ref/results/99_x.json"\n'
    nb["metadata"]["papermill"] = {
        "parameters": {"profile": "quick", "results_path": "../runs/s5-ref/results/99_x.json"}
    }
    assert any("metadata" in problem for problem in rules.no_run_folder_injected(nb))
    published = output_cleanup.settle_injected_results_path(nb, "99_x")
    assert published["metadata"]["papermill"]["parameters"] == {
        "profile": "quick",
        "results_path": "../results/reference/99_x.json",
    }
    assert rules.no_run_folder_injected(published) == []


def test_clean_folds_the_solutions_on_the_site_and_keeps_their_code():
    nb = good_notebook()
    nb["cells"].append(code("answer = 42", tags=["solution"]))
    cleaned, report = output_cleanup.clean_notebook(nb)
    assert rules.solutions_collapsed(nb) and rules.solutions_collapsed(cleaned) == []
    assert cleaned["cells"][-1]["metadata"]["tags"] == ["solution", "hide-input"]
    # the tag, and JupyterLab's fold of the code (the site folds it too)
    assert cleaned["cells"][-1]["source"] == "answer = 42" and report["site_tags_added"] == 2
    assert cleaned["cells"][-1]["metadata"]["jupyter"] == {"source_hidden": True}
    assert output_cleanup.clean_notebook(cleaned)[1]["site_tags_added"] == 0


def test_clean_removes_the_execution_paths_and_times_and_keeps_the_rest():
    executed = papermill_executed(good_notebook())
    cleaned, report = output_cleanup.clean_notebook(executed, repo_roots=["/home/someone/calibmed"])
    assert cleaned["metadata"]["papermill"] == {
        "default_parameters": {},
        "environment_variables": {},
        "exception": None,
        "parameters": {"profile": "quick"},
        "version": "2.7.0",
    }
    for cell in cleaned["cells"]:
        assert cell["metadata"]["papermill"] == {"exception": False, "status": "completed"}
        assert "execution" not in cell["metadata"]
    n_code = sum(cell["cell_type"] == "code" for cell in executed["cells"])
    assert report["run_metadata_removed"] == 5 + 3 * len(executed["cells"]) + n_code
    assert rules.no_absolute_paths(cleaned) == [] and rules.no_timestamps(cleaned) == []
    assert [c["source"] for c in cleaned["cells"]] == [c["source"] for c in executed["cells"]]
    assert [c.get("outputs") for c in cleaned["cells"]] == [c.get("outputs") for c in executed["cells"]]
    assert output_cleanup.clean_notebook(cleaned)[1]["run_metadata_removed"] == 0  # cleaning twice changes nothing


def tqdm_outputs():
    redraws = [
        f"\repochs: {p:3d}%|{'█' * (p // 10):10s}| {n}/3 [00:{n * 4:02d}<00:08, 4.00s/it, training loss=0.{9 - n}]"
        for n, p in ((1, 33), (2, 66), (3, 100))
    ]
    return [stream(text, "stderr") for text in redraws] + [stream("\n", "stderr")]


def test_clean_keeps_the_last_redraw_as_one_line_and_changes_nothing_else():
    nb = good_notebook()
    kept_warning = stream("note (multiclass): LS+: raised to it\n")
    nb["cells"][4]["outputs"] = [stream("training\n")] + tqdm_outputs() + [kept_warning]
    nb["cells"][6]["outputs"].append(
        {
            "output_type": "execute_result",
            "execution_count": 1,
            "metadata": {},
            "data": {"text/plain": ["PosixPath('/srv/ci/calibmed/runs/r.json')"]},
        }
    )
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    cleaned, report = output_cleanup.clean_notebook(nb, repo_roots=["/srv/ci/calibmed"])
    assert cleaned["cells"][4]["outputs"] == [
        stream("training\n"),
        stream(["epochs: 3/3 in 12 s (training loss=0.6)\n"]),
        kept_warning,
    ]
    assert cleaned["cells"][6]["outputs"][-1]["data"]["text/plain"] == ["PosixPath('runs/r.json')"]
    assert "widgets" not in cleaned["metadata"]
    assert report["outputs_removed"] == 4 and report["widget_state_removed"]
    assert report["bytes_after"] < report["bytes_before"]
    # every cell source and every other output is untouched
    assert [c["source"] for c in cleaned["cells"]] == [c["source"] for c in nb["cells"]]
    assert cleaned["cells"][3] == nb["cells"][3]
    assert {name for name, problems in rules.check_notebook(cleaned).items() if problems} == set()


def test_clean_leaves_a_stderr_message_that_is_not_a_bar():
    nb = good_notebook()
    nb["cells"][4]["outputs"] = [stream("RuntimeWarning: overflow\n", "stderr")]
    cleaned, _ = output_cleanup.clean_notebook(nb, repo_roots=["/nowhere"])
    assert cleaned["cells"][4]["outputs"] == nb["cells"][4]["outputs"]
    assert rules.no_raw_warnings(cleaned)


def test_clean_rewrites_only_whole_path_prefixes():
    assert (
        output_cleanup._relative("/srv/calibmed/data and /srv/calibmed2/x and /srv/calibmed", ["/srv/calibmed"])
        == "data and /srv/calibmed2/x and ."
    )


def test_clean_files_writes_atomically_and_keeps_the_layout(tmp_path):
    nb = good_notebook()
    nb["cells"][4]["outputs"] = tqdm_outputs()
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False))
    [row] = output_cleanup.clean_files([path], repo_roots=[str(tmp_path)])
    written = path.read_text()
    assert row["rules_failing"] == [] and row["outputs_removed"] == 4
    assert written == json.dumps(json.loads(written), indent=1, sort_keys=True, ensure_ascii=False)
    assert [p.name for p in tmp_path.iterdir()] == ["99_x.ipynb"]  # no temporary file left behind


def test_machinery_in_the_main_flow_is_flagged_and_the_same_text_in_the_expert_cell_is_not():
    """Issue 28, item 3: each piece of machinery today's notebooks print, in a main-flow cell, is one problem; the
    good notebook's expert cell prints all of them and keeps the rule (folded cells are not the main flow)."""
    printed = {
        "a hex hash": "training version 9d9ac9ec25c85945",
        "an md5": "The file's md5 matches the official release.",
        "the data folder": "source: $CALIBMED_DATA_DIR/dermamnist.npz",
        "a results path": "results written to results/reference/06_multiclass_comparison.json",
        "a compute time": "notebook compute time 38 s",
        "a settings dump": "[06_multiclass_comparison] profile 'reference', dataset 'dermamnist'; knobs: image_size=28",
        "a per-run log line": "BCE, seed 0: stored run synthetic_chestmnist/75592910eca2881cdf4c",
        'a "(*)" mark': "LS, seed 1 (*)",
        "the older-training-code warning": "warning: 6 of 6 stored runs come from older training code.",
        "a raw log line": "epochs: 1/1 in 22 s (train_loss=1.2686, val_nll=0.7765, val_acc=0.773)",
    }
    assert rules.main_flow_quiet(good_notebook()) == []
    for what, line in printed.items():
        nb = good_notebook()
        nb["cells"][4]["outputs"].append(stream(line + "\n"))
        problems = rules.main_flow_quiet(nb)
        assert any(f"prints {what} in the main flow" in problem for problem in problems), (what, problems)
        for tag in rules.MAIN_FLOW_HIDDEN_TAGS:  # the same output in a folded or removed cell is not main flow
            nb["cells"][4]["metadata"]["tags"] = [tag]
            assert rules.main_flow_quiet(nb) == [], (what, tag)
    nb = good_notebook()
    nb["cells"][4]["outputs"].append(stream("7 classes; seed 0; colour #1f77b4; 0.0123456789 ECE; 20,000 images\n"))
    assert rules.main_flow_quiet(nb) == []  # numbers, colours and long decimals are not hashes


def test_at_most_one_provenance_line_counts_old_summaries_and_other_profiles_too():
    nb = good_notebook()
    assert [line for _, line in rules.provenance_lines(nb)] == [
        "6 stored runs · DermaMNIST 28 px · seeds 0–2 · trained deterministically on a GPU"
    ]
    for second in (
        "smoke profile · 2 runs trained here · DermaMNIST 28 px · seed 0 · trained deterministically on a CPU",
        "54 stored runs loaded — dermamnist, seeds 0–2, trained deterministically on NVIDIA H100 80GB HBM3,",
        "1 run from the run cache · DermaMNIST 28 px · seed 0 · trained on a CPU, not deterministically",
        "DermaMNIST 28 px · no trained model loaded",
    ):
        nb = good_notebook()
        nb["cells"][6]["outputs"] = [stream(second + "\n")]
        assert rules.one_provenance_line(nb) == ["2 provenance lines in the main flow (cells [4, 6]), at most 1"]
        nb["cells"][6]["metadata"]["tags"] = ["expert"]
        assert rules.one_provenance_line(nb) == []
    nb = good_notebook()
    nb["cells"][4]["outputs"] = [stream("72 runs = 9 losses × (5 seeds well-regularised + 3 seeds over-fitting)\n")]
    assert rules.provenance_lines(nb) == []  # a count of runs that is a result, not the machinery


def test_the_details_cell_is_one_expert_cell_and_results_are_saved():
    nb = good_notebook()
    assert rules.run_details_folded(nb) == []
    nb["cells"].append(code("course.details(cfg)", tags=["expert"]))
    assert rules.run_details_folded(nb) == ["2 cells call course.details [8, 9]; exactly one is needed"]
    nb = good_notebook()
    nb["cells"].pop(8)
    assert rules.run_details_folded(nb) == ["0 cells call course.details []; exactly one is needed"]
    nb = good_notebook()
    nb["cells"][6]["source"] = "results = {}"
    assert rules.run_details_folded(nb) == ["no cell calls course.save_results"]
    nb = good_notebook()
    nb["cells"][8]["metadata"]["tags"] = ["hide-cell"]
    assert rules.run_details_folded(nb) == ["cell 8 calls course.details but is not tagged 'expert'"]


def test_prose_inside_an_expert_block_or_an_expert_cell_is_not_main_flow():
    folded = 'Intro words here.\n\n<details class="expert"><summary>For the expert</summary>\n\n' + "word " * 400
    nb = good_notebook()
    nb["cells"].append(markdown(folded + "\n\n</details>\n\nAfter the block."))
    nb["cells"].append(code("per_seed_table()", tags=["expert"]))
    counts = rules.main_flow_word_counts(nb)
    assert counts[-2] == 6  # "Intro words here." and "After the block."
    assert not rules.main_flow_cells(nb)
    nb["cells"][-2]["metadata"]["tags"] = ["expert"]
    assert rules.main_flow_word_counts(nb)[-2] == 0


def test_notebook_00_has_the_lower_word_limit():
    nb = good_notebook()
    nb["cells"].extend(markdown("word " * 300) for _ in range(7))  # 2,100 words and the summary
    assert not rules.main_flow_words(nb)
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace("# 99", "# 00")
    assert rules.main_flow_words(nb)


def test_words_are_words_not_markup_or_math_symbols():
    assert rules.count_words("A **bold** [link](../docs/x.md), $p_k = 0.1$ and 3 seeds.") == 9


def test_human_headers_and_printed_numbers_pass():
    nb = good_notebook()
    html = "<table><tr><th>ECE (%)</th><th>AUROC (OvR, %)</th><th>small CNN</th></tr></table>"
    nb["cells"][4]["outputs"] += [
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": html}},
        stream("LS − CE: +4.4 [+2.7, +4.9]; temperatures 1.42, 1.50\n"),
    ]
    assert not rules.human_table_headers(nb) and not rules.no_printed_lists(nb)


def test_clean_folds_an_expert_code_cell_on_the_site_and_in_jupyterlab():
    nb = good_notebook()
    nb["cells"].append(code("per_seed_table()", [stream("seed 0 …\n")], tags=["expert"]))
    cleaned, _ = output_cleanup.clean_notebook(nb)
    cell = cleaned["cells"][-1]
    assert "hide-cell" in cell["metadata"]["tags"]
    assert cell["metadata"]["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    assert cell["outputs"] == nb["cells"][-1]["outputs"]


def test_clean_folds_a_hidden_machinery_cell_in_jupyterlab_as_the_site_does():
    """A code cell tagged ``hide-cell`` (the imports, ``save_results``) is folded on the website; JupyterLab showed
    it open, so a student reading there met the machinery the site hides (issue 28)."""
    nb = good_notebook()
    nb["cells"].append(code("from helpers import course", [], tags=["hide-cell"]))
    cleaned, _ = output_cleanup.clean_notebook(nb)
    assert cleaned["cells"][-1]["metadata"]["jupyter"] == {"source_hidden": True, "outputs_hidden": True}


def test_clean_folds_the_code_of_a_hide_input_cell_in_jupyterlab_and_keeps_its_outputs_open():
    """A ``hide-input`` cell (a table printed by machinery code) shows only its output on the website; JupyterLab
    showed its code too, so a student reading there met code the site hides (issue 28)."""
    nb = good_notebook()
    nb["cells"].append(code("show_table(results)", [stream("LS − CE: +4.4\n")], tags=["hide-input"]))
    cleaned, changes = output_cleanup.clean_notebook(nb)
    assert cleaned["cells"][-1]["metadata"]["jupyter"] == {"source_hidden": True}
    assert cleaned["cells"][-1]["outputs"] == nb["cells"][-1]["outputs"]
    again, _ = output_cleanup.clean_notebook(cleaned)
    assert again == cleaned


def test_a_matplotlib_font_fallback_message_is_a_raw_warning():
    """08 and 00 were published with "findfont: Font family ['STIXGeneral'] not found" on stderr (a stale font
    cache on the executing machine); the rule looked for the word "Warning" only."""
    nb = good_notebook()
    nb["cells"][4]["outputs"].append(
        stream("findfont: Font family ['STIXGeneral'] not found. Falling back to DejaVu Sans.\n", "stderr")
    )
    assert rules.no_raw_warnings(nb) == [
        "cell 4 (stderr): findfont: Font family ['STIXGeneral'] not found. Falling back to DejaVu Sans."
    ]


def test_clean_opens_the_outputs_of_a_cell_retagged_from_hide_cell_to_hide_input():
    """A cell folded whole (``hide-cell``) and later moved into the main flow as ``hide-input`` kept JupyterLab's
    ``outputs_hidden`` flag: the website showed the result, JupyterLab hid it (01's training curves, 04's verdict
    table, 12's decision figure). The flags follow the tags; a cell with neither tag is unfolded."""
    nb = good_notebook()
    folded = {"source_hidden": True, "outputs_hidden": True}
    nb["cells"].append(code("show_table(results)", [stream("LS − CE: +4.4\n")], tags=["hide-input"], jupyter=folded))
    nb["cells"].append(code("plot(results)", [stream("figure\n")], jupyter=dict(folded)))
    assert rules.main_flow_outputs_open(nb)
    cleaned, changes = output_cleanup.clean_notebook(nb)
    assert cleaned["cells"][-2]["metadata"]["jupyter"] == {"source_hidden": True}
    assert "jupyter" not in cleaned["cells"][-1]["metadata"]
    assert not rules.main_flow_outputs_open(cleaned)
    assert changes["site_tags_added"] >= 2


#: the rules of issue 16's two layers, switched on for the committed notebooks once every notebook is restructured
TWO_LAYER_RULES_ON_COMMITTED = True
TWO_LAYER_RULES = ("main_flow_words", "main_flow_cells", "no_printed_lists", "human_table_headers")


#: issue 28, item 3: the committed notebooks were executed before the main flow went quiet (one provenance line, the
#: rest in the folded details cell); they are re-executed once, at the end, by the lead. Until then these output rules
#: are checked on small notebooks above (and by course.publish on every executed notebook); set this to True when the
#: re-executed notebooks are committed. run_details_folded reads the sources and is checked on the committed ones now.
QUIET_PROVENANCE_RULES_ON_COMMITTED = True
QUIET_PROVENANCE_RULES = ("main_flow_quiet", "one_provenance_line")


def committed_cases():
    for path in COMMITTED:
        for rule in rules.RULES:
            yield pytest.param(path, rule, id=f"{path.stem[:2]}-{rule}")


@pytest.mark.parametrize("path, rule", list(committed_cases()))
def test_committed_notebook_keeps_rule(path, rule):
    if rule in QUIET_PROVENANCE_RULES and not QUIET_PROVENANCE_RULES_ON_COMMITTED:
        pytest.skip("switched on once the notebooks are re-executed (QUIET_PROVENANCE_RULES_ON_COMMITTED)")
    if rule in TWO_LAYER_RULES and not TWO_LAYER_RULES_ON_COMMITTED:
        pytest.skip("switched on once every notebook has its two layers (TWO_LAYER_RULES_ON_COMMITTED)")
    nb = json.loads(path.read_text(encoding="utf-8"))  # the whole file: metadata, sources and outputs
    problems = getattr(rules, rule)(nb)
    assert not problems, f"{path.name} breaks {rule}: " + "; ".join(problems[:5])


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.stem[:2])
def test_committed_notebook_file_holds_no_timestamp_or_execution_path(path):
    """The file's text as committed (base64 images cannot hold a date and time: no '-' or ':' in base64)."""
    text = path.read_text(encoding="utf-8")
    assert not rules.TIMESTAMP.search(text), f"{path.name}: {rules.TIMESTAMP.search(text).group()} in the file"
    for key in ("input_path", "output_path", "start_time", "end_time", "iopub.execute_input"):
        assert f'"{key}"' not in text, f"{path.name} stores {key}: python -m helpers.course clean-outputs"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.stem[:2])
def test_committed_notebook_has_no_tex_in_a_details_summary(path):
    """The website leaves TeX inside a ``<summary>`` raw ("$g_\\gamma$" on the page): 09 and then 02 broke it, and
    only CI's browser test caught it. Write the symbol in Unicode there (g_γ → "gγ", p² …)."""
    import re

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    summaries = [
        summary
        for cell in cells
        if cell["cell_type"] == "markdown"
        for summary in re.findall(r"<summary>(.*?)</summary>", "".join(cell["source"]), flags=re.S)
    ]
    assert not [summary for summary in summaries if "$" in summary], f"{path.name}: TeX in a <summary>"
