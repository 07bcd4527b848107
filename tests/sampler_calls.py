"""The sampler calls of a coalition valuation, recorded: how many rows each holds and the size it is padded to
(`CoalitionSurprise._batch_inputs`, which every call goes through)."""

from bayesval.parties import surprise


def record_sampler_calls(set_attribute) -> list[tuple[int, int]]:
    """Wrap `CoalitionSurprise._batch_inputs` through `set_attribute` (pytest's `monkeypatch.setattr`, or `setattr`
    in a worker process) and return the list that each later call appends its (rows, padded size) to."""
    padded, calls = surprise.CoalitionSurprise._batch_inputs, []

    def recording(self, config, batch_rows, keys, *rest):
        calls.append((len(keys), batch_rows))
        return padded(self, config, batch_rows, keys, *rest)

    set_attribute(surprise.CoalitionSurprise, "_batch_inputs", recording)
    return calls
