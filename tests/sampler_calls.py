"""The sampler calls of a coalition valuation, recorded: how many rows each holds and the size it is padded to, as
its plan laid them out (`bayesval.parties.plan.SamplerCall`) and the executor ran them (`CallExecutor.run`, which
every call goes through)."""

from bayesval.parties.execute import CallExecutor


def record_sampler_calls(set_attribute) -> list[tuple[int, int]]:
    """Wrap `CallExecutor.run` through `set_attribute` (pytest's `monkeypatch.setattr`, or `setattr` in a worker
    process) and return the list that each later call appends its planned (rows, padded size) to."""
    run, calls = CallExecutor.run, []

    def recording(self, call, rows):
        calls.append((len(call.rows), call.size))
        return run(self, call, rows)

    set_attribute(CallExecutor, "run", recording)
    return calls
