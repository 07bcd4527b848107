"""Progress-bar descriptions (bayesval.progress): the caller's stage, which call of it, then the sampler."""

from bayesval.progress import describe, stage


def test_a_stage_names_each_of_its_sampler_calls_and_ends_with_it():
    assert describe("Gibbs") == "Gibbs"
    with stage("valuation: posteriors of 7 coalitions", calls=2):
        first, second = describe("Gibbs"), describe("Gibbs")
    assert first == "valuation: posteriors of 7 coalitions, call 1 of 2 [Gibbs]"
    assert second == "valuation: posteriors of 7 coalitions, call 2 of 2 [Gibbs]"
    with stage("rewards", calls=1):
        assert describe("NUTS") == "rewards [NUTS]"
    with stage("search"):  # the number of calls unknown: counted from the second on
        assert [describe("Gibbs") for _ in range(2)] == ["search [Gibbs]", "search, call 2 [Gibbs]"]
    assert describe("Gibbs") == "Gibbs"


def test_an_inner_stage_replaces_the_outer_one_while_it_lasts():
    with stage("outer", calls=3):
        assert describe("Gibbs") == "outer, call 1 of 3 [Gibbs]"
        with stage("inner"):
            assert describe("Gibbs") == "inner [Gibbs]"
        assert describe("Gibbs") == "outer, call 2 of 3 [Gibbs]"
