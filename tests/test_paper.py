"""The packaged copy of the paper's tables, with base values filled into Table 3's blank fields."""

from __future__ import annotations

import pytest

from aiayn.paper import paper_bleu_and_cost, paper_table2, paper_table3

ROWS = [
    "base",
    "A1",
    "A2",
    "A3",
    "A4",
    "B1",
    "B2",
    "C1",
    "C2",
    "C3",
    "C4",
    "C5",
    "C6",
    "C7",
    "D1",
    "D2",
    "D3",
    "D4",
    "E",
    "big",
]
FIELDS = (
    "N",
    "d_model",
    "d_ff",
    "h",
    "d_k",
    "d_v",
    "P_drop",
    "eps_ls",
    "train_steps",
    "ppl_dev",
    "bleu_dev",
    "params_m",
)


def test_table3_rows_in_the_papers_order_with_every_field():
    table = paper_table3()
    assert list(table) == ROWS
    for row in table.values():
        assert all(f in row for f in FIELDS)


def test_table3_fills_blanks_from_base_and_keeps_deltas():
    t = paper_table3()
    assert (t["A1"]["h"], t["A1"]["d_k"], t["A1"]["d_model"], t["A1"]["bleu_dev"]) == (1, 512, 512, 24.9)
    assert (t["B1"]["d_k"], t["B1"]["d_v"], t["B1"]["params_m"]) == (16, 64, 58)
    assert (t["C4"]["d_model"], t["C4"]["d_ff"], t["C4"]["params_m"]) == (256, 2048, 28)
    assert (t["D3"]["eps_ls"], t["D3"]["P_drop"], t["D3"]["ppl_dev"]) == (0.0, 0.1, 4.67)
    assert t["E"]["pos_encoding"] == "learned" and t["E"]["bleu_dev"] == 25.7
    assert (t["big"]["d_k"], t["big"]["P_drop"], t["big"]["train_steps"]) == (64, 0.3, 300000)
    t["base"]["bleu_dev"] = 0.0  # callers may mutate their copy without touching the next caller's
    assert paper_table3()["base"]["bleu_dev"] == 25.8


def test_a_row_without_its_own_dev_bleu_is_an_error_not_a_copy_of_base(monkeypatch):
    """A blank setting means "as base"; a blank result would make the row's Δ 0 ("no difference") if filled."""
    import aiayn.paper as paper

    real = paper._load

    def without_d2_bleu():
        tables = real()
        del tables["table3"]["D"][1]["bleu_dev"]
        return tables

    monkeypatch.setattr(paper, "_load", without_d2_bleu)
    with pytest.raises(ValueError, match=r"table3\.D\[1\] \(row D2\) has no bleu_dev"):
        paper_table3()


def test_table2_and_costs():
    table = paper_table2()
    assert table[0]["model"] == "ByteNet" and table[-1]["model"] == "Transformer (big)"
    assert paper_bleu_and_cost("Transformer (base model)", "en_de") == (27.3, 3.3e18)
    assert paper_bleu_and_cost("Transformer (big)", "en_fr") == (41.8, 2.3e19)
    assert paper_bleu_and_cost("GNMT + RL", "en_fr") == (39.92, 1.4e20)
    assert paper_bleu_and_cost("ByteNet", "en_fr") == (None, None)


def test_packaged_copy_is_verbatim(repo_root, shared_dir):
    packaged = repo_root / "src" / "aiayn" / "paper_tables.yaml"
    assert packaged.read_bytes() == (shared_dir / "paper" / "tables.yaml").read_bytes()
