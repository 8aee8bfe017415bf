"""Issue 29: `make course` printed "Kernel is running over TCP without encryption" once per notebook. ipykernel (7.4
and later) warns so when its connection carries no CurveZMQ keys, and jupyter_client provisions none by default
(``KernelManager.transport_encryption = "disabled"``). The runner starts its kernels with ``"auto"``: keys for a
kernelspec that declares ``curve`` support, as ipykernel's does, so the connection is encrypted and the warning has
no cause. A kernel started without that setting is shown warning first, so the capture would see the warning."""

import nbformat
import pytest

from helpers.course import runner

WARNING = "Kernel is running over TCP without encryption"
PROBE = (
    "from ipykernel.kernelapp import IPKernelApp\n"
    "print('encrypted:', IPKernelApp.instance().curve_secretkey is not None)"
)


def probe_notebook(folder):
    folder.mkdir()
    cells = [
        nbformat.v4.new_code_cell("results_path = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(PROBE),
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "99_probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
    return path


def printed(path):
    return "".join(output.get("text", "") for output in nbformat.read(path, as_version=4).cells[-1].outputs)


@pytest.mark.slow
def test_the_runners_kernels_are_encrypted_and_do_not_warn(tmp_path, monkeypatch, capfd):
    import papermill
    import zmq

    if not zmq.has("curve"):
        pytest.skip("this pyzmq has no CurveZMQ: the kernel's warning is true here")
    source = probe_notebook(tmp_path / "notebooks")
    papermill.execute_notebook(str(source), str(tmp_path / "plain.ipynb"), kernel_name="python3", progress_bar=False)
    assert WARNING in capfd.readouterr().err  # jupyter_client's default: no keys, and ipykernel says so
    assert printed(tmp_path / "plain.ipynb") == "encrypted: False\n"

    assert runner.kernel_manager_config().KernelManager.transport_encryption == "auto"
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", source.parent)
    (tmp_path / "run" / "notebooks").mkdir(parents=True)
    row = runner.execute_notebook(source, tmp_path / "run", None, {}, prepare_only=False)
    captured = capfd.readouterr()
    assert row["status"] == "ok", row
    assert WARNING not in captured.err + captured.out
    assert printed(tmp_path / "run" / "notebooks" / "99_probe.ipynb") == "encrypted: True\n"
