import pytest

from mlerl.actors import AdmissionConfig
from mlerl.actors._admission import Admission, Verdict
from mlerl.protocol import ConfigError

E, S, D = Verdict.EXECUTE, Verdict.SEND, Verdict.DROP


def test_capacity_is_ceil_m_times_slots():
    # ceil(1.5 * 4) = 6; ceil(1.0 * 3) = 3; ceil(1.25 * 3) = ceil(3.75) = 4
    assert AdmissionConfig(max_in_flight=4, oversample=1.5).capacity == 6
    assert AdmissionConfig(max_in_flight=3, oversample=1.0).capacity == 3
    assert AdmissionConfig(max_in_flight=3, oversample=1.25).capacity == 4


@pytest.mark.parametrize(
    "kw,key",
    [
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"oversample": 0.5}, "oversample"),
        ({"max_versions_behind": -1}, "max_versions_behind"),
        ({"max_age_s": -1.0}, "max_age_s"),
    ],
)
def test_config_validation(kw, key):
    with pytest.raises(ConfigError, match=key):
        AdmissionConfig(**kw)


def test_admit_execute_send_sequence():
    adm = Admission(AdmissionConfig(max_in_flight=2, oversample=1.5))  # capacity 3
    ids = adm.admit()
    assert ids == [0, 1, 2] and adm.admit() == []
    for i in ids:
        adm.on_generated(i, version=0, now=1.0)
    # two slots: 0 and 1 execute, 2 waits
    assert adm.schedule(now=1.0) == [(0, E), (1, E)]
    assert adm.schedule(now=1.0) == []
    assert adm.on_finished(1, now=2.0) is S
    # a slot and a capacity unit are free again
    assert adm.schedule(now=2.0) == [(2, E)]
    assert adm.admit() == [3]
    assert adm.stats["sent"] == 1


def test_stale_ready_action_is_dropped_before_execution_but_executed_ones_are_sent():
    adm = Admission(AdmissionConfig(max_in_flight=1, oversample=2.0, max_versions_behind=1))
    a, b = adm.admit()
    adm.on_generated(a, version=0, now=0.0)
    adm.on_generated(b, version=0, now=0.0)
    assert adm.schedule(0.0) == [(a, E)]
    adm.on_version(2)  # 2 - 0 = 2 > 1 behind: both stale now
    assert adm.schedule(1.0) == [(b, D)]
    # the running one finishes stale: still sent by default (dropping it would starve slow
    # programs, the bias the duration-aware gradient removes)
    assert adm.on_finished(a, 2.0) is S
    assert adm.alive == 0
    assert adm.stats == {"admitted": 2, "sent": 1, "dropped_ready": 1, "dropped_done": 0}


def test_dropping_stale_executed_actions_is_opt_in():
    cfg = AdmissionConfig(
        max_in_flight=1, oversample=1.0, max_versions_behind=1, drop_stale_executed=True
    )
    adm = Admission(cfg)
    (a,) = adm.admit()
    adm.on_generated(a, version=0, now=0.0)
    assert adm.schedule(0.0) == [(a, E)]
    adm.on_version(2)
    assert adm.on_finished(a, 2.0) is D
    assert adm.stats["dropped_done"] == 1


def test_version_bound_is_inclusive():
    adm = Admission(AdmissionConfig(max_in_flight=1, oversample=1.0, max_versions_behind=2))
    (a,) = adm.admit()
    adm.on_generated(a, version=3, now=0.0)
    adm.on_version(5)  # exactly 2 behind: still fresh
    assert adm.schedule(0.0) == [(a, E)]
    assert adm.on_finished(a, 0.0) is S


def test_age_bound_and_deadline():
    adm = Admission(
        AdmissionConfig(max_in_flight=1, oversample=2.0, max_versions_behind=0, max_age_s=10.0)
    )
    a, b = adm.admit()
    adm.on_generated(a, 0, now=100.0)
    adm.on_generated(b, 0, now=105.0)
    assert adm.schedule(100.0) == [(a, E)]
    assert adm.next_deadline() == 115.0  # b generated at 105 + 10 s
    assert adm.on_finished(a, now=109.0) is S
    assert adm.schedule(now=116.0) == [(b, D)]
    adm.on_version(100)  # versions unbounded when max_versions_behind = 0
    (c,) = adm.admit()[:1]
    adm.on_generated(c, 0, now=200.0)
    assert adm.schedule(200.0) == [(c, E)]


def test_unparsed_action_skips_execution_and_failures_free_capacity():
    adm = Admission(AdmissionConfig(max_in_flight=1, oversample=1.0))
    (a,) = adm.admit()
    adm.on_generated(a, 0, now=0.0)
    assert adm.on_finished(a, 0.0) is S  # from READY, without executing
    (b,) = adm.admit()
    adm.on_failed(b)  # e.g. the engine raised
    assert adm.alive == 0 and len(adm.admit()) == 1


def test_wrong_transitions_raise():
    adm = Admission(AdmissionConfig())
    (a, *_) = adm.admit()
    with pytest.raises(KeyError):
        adm.on_finished(a, 0.0)
    with pytest.raises(KeyError):
        adm.on_generated(999, 0, 0.0)
    adm.on_version(3)
    adm.on_version(1)  # versions never go back
    assert adm.version == 3
