"""OpenAIEngine against a real ``vllm`` OpenAI-compatible server on loopback (CPU build).

Run in the vLLM venv: ``.venv-vllm/bin/python -m pytest -m vllm tests/actors``."""

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
import torch

pytest.importorskip("vllm", reason="vLLM runs in .venv-vllm: make test-vllm")

from mlerl.actors import OpenAIEngine  # noqa: E402
from mlerl.protocol import ChatMessage, SamplingParams  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "wb")
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model_dir),
        "--served-model-name",
        "tiny",
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--gpu-memory-utilization",
        "0.3",
        "--enforce-eager",
        "--logprobs-mode",
        "processed_logprobs",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"server exited: {open(log.name).read()[-2000:]}"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("vLLM server did not become healthy")
        yield url + "/v1"
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


async def test_generate_with_ids_and_logprobs(server, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    engine = OpenAIEngine(server, "tiny")
    conv = [ChatMessage(role="user", content="Write a training script")]
    params = SamplingParams(max_new_tokens=12, temperature=0.7, seed=3)
    try:
        (a,) = await engine.generate([conv], params)
        (b,) = await engine.generate([conv], params)
    finally:
        await engine.close()
    assert len(a.token_ids) == len(a.logprobs) > 0 and len(a.prompt_ids) > 0
    assert a.token_ids == b.token_ids  # the seed makes it reproducible
    assert a.finish_reason in ("stop", "length")
    # the server's processed log-probs are log_softmax(logits / T), like HFEngine's
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.tensor([a.prompt_ids + a.token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    start = len(a.prompt_ids) - 1
    logp = torch.log_softmax(logits[start : start + len(a.token_ids)] / 0.7, dim=-1)
    expected = logp.gather(-1, torch.tensor(a.token_ids)[:, None])[:, 0].tolist()
    assert a.logprobs == pytest.approx(expected, abs=2e-3)
