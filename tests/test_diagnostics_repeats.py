"""`lint`'s text output on a 600-task import: a warning code repeated on every task is shown
five times and summed up in one line (945 lines before); errors are always shown in full."""

from __future__ import annotations

from harnessc.diagnostics import REPEATS_SHOWN, Diagnostic, Span, render_text


def test_a_warning_repeated_hundreds_of_times_is_summed_up_in_one_line():
    text = "".join(f"- [ ] **t{i}**: Task {i}\n" for i in range(1, 301))
    items = [Diagnostic("HC410", "warning", f"nothing verifies task 't{i}'", Span("roadmap.md", i, 9), "add an accept:")
             for i in range(1, 301)]
    items += [Diagnostic("HC401", "error", f"unknown dependency 'x{i}'", Span("roadmap.md", i, 1)) for i in range(1, 8)]
    out = render_text(sorted(items, key=Diagnostic.sort_key), {"roadmap.md": text}, {}, REPEATS_SHOWN)
    lines = out.splitlines()
    assert sum("warning[HC410]: nothing verifies" in ln for ln in lines) == 5
    assert sum("error[HC401]" in ln for ln in lines) == 7  # never summed up
    assert ("roadmap.md: warning[HC410]: 295 more like the above (nothing verifies this task), at lines "
            "6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 285 more") in lines
    assert "  hint: `--output json` lists each; `--ignore HC410` leaves them out" in lines
    assert len(lines) < 60
    # without `repeats` (json, golden tests): every one
    assert render_text(items, {"roadmap.md": text}).count("warning[HC410]") == 300
