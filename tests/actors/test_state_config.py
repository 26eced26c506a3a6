import asyncio

import pytest
import yaml

from mlerl.actors import ActorsConfig, AdmissionConfig
from mlerl.actors.__main__ import main
from mlerl.actors._engines import make_engine
from mlerl.actors._gate import VersionGate
from mlerl.actors._state import ActorState
from mlerl.protocol import ConfigError, ExecStatus, PromptKind, Sample, load_section


def sample(seq):
    return Sample(
        sample_id=f"a:{seq}",
        actor_id="a",
        seq=seq,
        task_id="t",
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=[1],
        response_ids=[2],
        behaviour_logprobs=[-0.1],
        policy_version=0,
        t_sampled=1.0,
        exec_status=ExecStatus.NOT_RUN,
        reward=-10.0,
    )


def test_state_records_prunes_and_reloads(tmp_path):
    st = ActorState(tmp_path)
    assert (st.next_seq, st.acked_seq, st.pending()) == (0, -1, [])
    for i in range(4):
        st.record(sample(i))
    with pytest.raises(ValueError, match="expected 4"):
        st.record(sample(7))
    assert st.prune(1) == 2 and st.prune(0) == 0
    again = ActorState(tmp_path)
    assert again.next_seq == 4 and again.acked_seq == 1
    assert [s.seq for s in again.pending()] == [2, 3]
    assert again.pending()[0] == sample(2)


def test_outbox_ahead_of_state_file_wins(tmp_path):
    # killed between writing the outbox entry and state.json: next_seq comes from the outbox
    st = ActorState(tmp_path)
    st.record(sample(0))
    (tmp_path / "state.json").write_text('{"next_seq": 0, "acked_seq": -1}')
    assert ActorState(tmp_path).next_seq == 1


def test_corrupt_outbox_entry_is_loud(tmp_path):
    st = ActorState(tmp_path)
    st.record(sample(0))
    (tmp_path / "outbox" / "000000000000.msgpack").write_bytes(b"\x00garbage")
    with pytest.raises(RuntimeError, match="corrupt outbox entry"):
        ActorState(tmp_path).pending()


@pytest.mark.parametrize(
    "kw,key",
    [
        ({"engine": "tgi"}, "engine"),
        ({"engine": "openai"}, "base_url"),
        ({"dtype": "int8"}, "dtype"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"infra_retries": -1}, "infra_retries"),
        ({"max_samples": -1}, "max_samples"),
        ({"heartbeat_s": 0.0}, "heartbeat_s"),
    ],
)
def test_config_rejects_bad_values(kw, key):
    with pytest.raises(ConfigError, match=key):
        ActorsConfig(**kw)


def test_config_loads_from_run_yaml(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"actors": {"temperature": 0.5, "admission": {"max_in_flight": 8}}})
    )
    cfg = load_section(ActorsConfig, path, "actors")
    assert cfg.temperature == 0.5 and cfg.admission == AdmissionConfig(max_in_flight=8)
    assert cfg.sampling(seed=3).seed == 3 and cfg.sampling().top_k == -1
    path.write_text(yaml.safe_dump({"actors": {"max_new_tokens": "many"}}))
    with pytest.raises(ConfigError, match="max_new_tokens"):
        load_section(ActorsConfig, path, "actors")


def test_entry_point_reports_config_errors(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"actors": {"engine": "nope"}}))
    assert main(["--config", str(path), "--actor-id", "a0"]) == 2
    assert "actors.engine" in capsys.readouterr().err


def test_make_engine_needs_a_model_path():
    with pytest.raises(ConfigError, match="model.path"):
        make_engine(ActorsConfig(engine="hf"), "")


async def test_gate_updates_wait_for_generations_and_block_new_ones():
    gate, log = VersionGate(), []
    release = asyncio.Event()

    async def generation(name, hold):
        async with gate.generating():
            log.append(f"start {name}")
            if hold:
                await release.wait()
            log.append(f"end {name}")

    async def update():
        async with gate.updating():
            log.append("update")

    async with asyncio.TaskGroup() as tg:
        tg.create_task(generation("g1", hold=True))
        await asyncio.sleep(0.01)
        tg.create_task(update())
        await asyncio.sleep(0.01)
        tg.create_task(generation("g2", hold=False))  # arrives while the update waits
        await asyncio.sleep(0.01)
        assert log == ["start g1"]
        release.set()
    assert log == ["start g1", "end g1", "update", "start g2", "end g2"]
