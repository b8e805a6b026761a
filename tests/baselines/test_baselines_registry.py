"""Row names of agents: :func:`fwgym.baselines.registry.check_policy_name`."""
import pytest

from fwgym.baselines.registry import MAX_POLICY_NAME_CHARS, check_policy_name, policy_name_key, policy_names


@pytest.mark.parametrize("name, why", [
    ("perfect_demand\u200b", r"do not print \(U\+200B \(Cf\)\)"),  # zero-width space
    ("\u200bperfect_demand", r"U\+200B \(Cf\)"),
    ("perfect\u00addemand", r"U\+00AD \(Cf\)"),  # soft hyphen
    ("a\nb", r"U\+000A \(Cc\)"),  # would break a Markdown table row
    ("a\tb", r"U\+0009 \(Cc\)"),
    ("mine\u202e", r"U\+202E \(Cf\)"),  # right-to-left override
    ("mine\ue000", r"U\+E000 \(Co\)"),  # private use
    ("perfect_demand ", "starts or ends with whitespace"),
    (" mine", "starts or ends with whitespace"),
    ("mine\u3000", "starts or ends with whitespace"),  # ideographic space (Zs)
    ("", "not a non-empty string"),
    (None, "not a non-empty string"),
    ("x" * (MAX_POLICY_NAME_CHARS + 1), f"101 characters long \\(at most {MAX_POLICY_NAME_CHARS}\\)"),
    ("Perfect_Demand", r"a policy of fwgym \(fwgym list policies\), 'perfect_demand', up to case"),
    ("PERFECT_DEMAND", "'perfect_demand', up to case"),
    ("\uff50erfect_demand", "'perfect_demand', up to case"),  # fullwidth p: NFKC maps it to p
    ("perfect_demand", r"is the name of a policy of fwgym \(fwgym list policies\); its row"),
    ("Chronos2", "'chronos2', up to case"),
])
def test_names_that_pass_for_a_policy_or_break_a_table_are_refused(name, why):
    with pytest.raises(ValueError, match=why):
        check_policy_name(name)


def test_names_of_the_runs_own_policies_are_refused_up_to_case():
    with pytest.raises(ValueError, match=r"another policy of this run \(--policies\), 'My_Agent', up to case"):
        check_policy_name("my_agent", ["weekday_empirical", "My_Agent"])
    check_policy_name("my_agent", ["weekday_empirical", "my_agent_2"])


@pytest.mark.parametrize("name", ["my agent", "openai:test-model", "Müller's agent", "агент", "x" * MAX_POLICY_NAME_CHARS,
                                  "perfect_demand_2", "a|b"])
def test_printable_names_of_no_policy_are_accepted(name):
    check_policy_name(name)


def test_the_key_is_nfkc_casefolded():
    assert policy_name_key("Stra\u00dfe") == policy_name_key("STRASSE") == "strasse"
    assert policy_name_key("\uff21\u2168") == "aix"  # fullwidth A, roman numeral nine
    assert len({policy_name_key(p) for p in policy_names()}) == len(policy_names())  # no two policies collide


def test_hindsight_policies_are_exactly_the_policies_that_require_hindsight():
    from fwgym.baselines.registry import HINDSIGHT_POLICIES, TSFM_POLICIES, make_policy, policy_names

    declared = {n for n in policy_names() if n not in TSFM_POLICIES
                and getattr(make_policy(n), "requires_hindsight", False)}
    assert declared == set(HINDSIGHT_POLICIES)



def test_look_alike_scripts_are_refused_and_the_message_names_the_commands_flag():
    from fwgym.baselines.registry import check_policy_name

    with pytest.raises(ValueError, match="mixes letters of the CYRILLIC, LATIN scripts.*--agent-name NAME"):
        check_policy_name("w\u0435\u0435kday_empirical")  # Cyrillic е twice: prints as weekday_empirical
    with pytest.raises(ValueError, match=r"name the agent with --policy-name NAME$"):
        check_policy_name("weekday_empirical", flag="--policy-name")
    check_policy_name("модель-1")  # one script is a name, not a disguise
