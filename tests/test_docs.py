"""The docs site builds strictly, its generated pages match their sources, and every docs link in the code, help
texts and README points at a page and anchor that exist."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import render_docs  # noqa: E402  (docs/ and benchmarks/ are no packages: their scripts import each other by name)
from markdown.extensions.toc import slugify  # noqa: E402

DOCS = ROOT / "docs"
# A docs reference in code or the README: docs/PAGE.md or docs/PAGE.md#anchor.
DOC_LINK = re.compile(r"docs/([\w/-]+\.md)(?:#([\w-]+))?")


def anchors(page: Path) -> set[str]:
    """The heading anchors MkDocs gives ``page`` (the toc extension's default slugs)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slugify(re.sub(r"[`*]", "", m), "-") for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_generated_pages_match_their_sources():
    differ = render_docs.stale(render_docs.render_all())
    assert not differ, (f"generated docs differ from benchmarks/results/*.json or the code: "
                        f"{', '.join(str(p.relative_to(ROOT)) for p in differ)}; run `make docs-render` "
                        f"(python docs/render_docs.py) and commit the result")


def test_docs_build_strictly_offline(tmp_path):
    """A broken link or anchor fails the build (strict), and the theme fetches no web fonts."""
    config = (ROOT / "mkdocs.yml").read_text()
    assert "strict: true" in config and "font: false" in config and "plugins" not in config
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "results" / "index.html").is_file()
    assert "fonts.googleapis" not in (tmp_path / "site" / "index.html").read_text()
    # A stated default stays inside its sentence: its markers are inline comments, never a block or visible text.
    for page in (tmp_path / "site").rglob("*.html"):
        html = page.read_text()
        assert "&lt;!--" not in html, page
        assert not re.search(r"^<!-- (default|preset):", html, flags=re.M), page


def test_docs_links_in_code_and_readme_point_at_existing_anchors():
    sources = [ROOT / "README.md", ROOT / "docs" / "render_docs.py",
               *[p for folder in ("robot_rl", "envs", "pretrain", "benchmarks") for p in (ROOT / folder).rglob("*.py")]]
    checked = 0
    for source in sources:
        for page, anchor in DOC_LINK.findall(source.read_text()):
            target = DOCS / page
            assert target.is_file(), f"{source.relative_to(ROOT)} links docs/{page}, which does not exist"
            if anchor:
                assert anchor in anchors(target), \
                    f"{source.relative_to(ROOT)} links docs/{page}#{anchor}: no such anchor"
            checked += 1
    assert checked >= 10  # the README alone links a dozen pages


def test_every_results_file_records_provenance():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        data = json.loads(path.read_text())
        for key in ("date", "commit", "argv"):
            assert data.get(key), f"{path.name} has no {key}"
        assert "machine" in data, f"{path.name} has no machine"
        assert "wall_s" in data, f"{path.name} has no wall time"
        assert render_docs.machine_text(data["machine"]).split(",")[0] in ("Intel Xeon", "AMD EPYC")


def test_write_results_adds_provenance(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["benchmarks/example.py", "--fast"])
    from results_file import write_results

    path = write_results("example", {"rows": [1, 2], "commit": "measured-elsewhere"}, out=tmp_path / "x.json")
    data = json.loads(path.read_text())
    assert data["benchmark"] == "example" and data["metrics"] == {"rows": [1, 2]}
    assert data["commit"] == "measured-elsewhere"  # the payload's own fields win
    assert data["argv"] == ["benchmarks/example.py", "--fast"] and data["date"] and data["machine"]["cpu"]
    assert isinstance(data["wall_s"], float)


def test_each_figure_names_the_machine_its_file_records():
    results = render_docs.load_results()
    for name in ("quick_demo", "robustness_12_epochs"):
        line = render_docs.provenance_line(name, results[name])
        assert render_docs.machine_text(results[name]["machine"]) in line and results[name]["commit"][:7] in line


@pytest.mark.parametrize("arms", [None, {}, {"recipe": {"status": "not run yet"}}])
def test_lead_inspect_results_render_without_finished_arms(arms):
    results = render_docs.load_results()
    if arms is None:
        results.pop("lead_inspect", None)
    else:
        results["lead_inspect"] = _lead_inspect(arms)
    text = _rendered(results, "results/arms-tasks.md")
    assert "`lead_inspect.json` (the recipe, BC trained 3x as long, and BC + DAgger on the lead task) has no " \
           "finished arm." in text


def test_lead_inspect_results_render_a_row_per_finished_arm():
    results = render_docs.load_results()
    final = {"episodes": 100, "success_rate": 0.91, "success_ci95": [0.84, 0.95], "guesses": 1,
             "collisions_per_episode": 0.05}
    results["lead_inspect"] = _lead_inspect({
        "recipe": {"status": "done", "final": final, "wall_s": 1234.0, "targets": {"met": True}},
        "dagger": {"status": "not run yet"}})
    pages = {name: render_docs.environment(results).get_template(name).render()
             for name in ("results/arms-tasks.md", "results/index.md")}
    assert "| recipe | 91% (84%-95%) | 100 | 0.05 | 1 | 1,234 s | yes |" in pages["results/arms-tasks.md"]
    assert "Not run yet: dagger." in pages["results/arms-tasks.md"]
    assert "`lead-inspect`, arm recipe" in pages["results/index.md"]


def _lead_inspect(arms: dict) -> dict:
    return {"benchmark": "lead_inspect", "date": "2026-12-03T00:00:00+00:00", "commit": "0" * 40,
            "argv": ["benchmarks/lead_inspect.py"], "machine": {"cpu": "AMD EPYC", "logical_cpus": 2},
            "targets": {"last_policy_success_min": 0.9, "collisions_per_episode_max": 0.1, "fresh_boards": 100},
            "arms": arms, "stage_seconds": {}}


def test_perception_arms_render_beside_the_74_percent_arm_with_their_targets():
    results = render_docs.load_results()
    perception = dict(results["perception"])
    perception.pop("equal-time", None)  # rendered below once its synthetic verdict is in
    suite = [dict(row, success_rate=0.96 if row["shift"] == "none" else 0.5, success_ci95=[0.4, 0.6])
             for row in results["robustness_surfaces"]["arms"]["surfaces-12-epochs"]["suite"]]
    perception.update(
        encoder={"views": 20000, "epochs": 8, "wall_s": 900.0, "views_per_s": 340.0, "final_val": {
            f"val/{name}": 0.9 for name in ("pixel_error_px", "in_view_accuracy", "segmentation_accuracy",
                                            "localized_accuracy", "defect_accuracy")}},
        arms={"encoder+recolour": {"suite": suite, "bc_wall_s": 3000.0, "extra_wall_s": 900.0,
                                   "evaluate_wall_s": 1500.0, "epochs": 12}},
        targets={"nominal_success": 0.95, "shift_success": 0.9}, uncommitted_changes=False,
        verdicts={"encoder+recolour": {"nominal_met": True, "shifts_missed": ["blue_table"], "met": False},
                  "winner": {"arm": "encoder+recolour", "seeds": 1, "pooled_nominal": 0.96, "pooled_ci95": [0.9, 0.98],
                             "boards": 100, "full_preset_nominal": 0.99, "adopt": False}})
    results["perception"] = perception
    text = _rendered(results, "results/robustness.md")
    assert "| shift | `surfaces`, the 74% arm | `encoder+recolour` |" in text
    assert "| `none` | 74% (" in text and "96% (40%-60%), " in text
    assert ("| `encoder+recolour` | 3,000 s | 900 s | 1,500 s | missed (1 of the shifts under 90%: blue_table) | "
            f"`{perception['commit'][:7]}` |") in text
    assert "The equal-wall-time baseline was not run (its part is retired)." in text
    perception["uncommitted_changes"] = True  # a record measured with changes not yet committed says so
    text = _rendered(results, "results/robustness.md")
    assert f"`{perception['commit'][:7]}` with uncommitted changes |" in text
    perception["uncommitted_changes"] = False
    assert "pooled 96% (90%-98%, 100 boards); shifts at 90%: 0 of 13." in text and "Not adopted" in text
    assert "Not run yet: `baseline`, `encoder`, `recolour`" in text
    # The README's row: the benchmark's winner, beside the recipe without it.
    readme = render_docs.environment(results).get_template("readme/results.md").render()
    row = next(line for line in readme.splitlines() if line.startswith("| tables of any colour"))
    # The equal-wall-time arm, once run, beside the winner.
    perception["equal-time"] = {"matched_arm": "encoder+recolour", "wall_budget_s": 3900.0,
                                "baseline_s_per_epoch": 88.0, "epochs": 44, "suite": suite}
    perception["verdicts"]["equal_time"] = {"arm": "encoder+recolour", "arm_worst_shift": 0.5,
                                            "baseline_worst_shift": 0.5, "arm_better": False}
    text = _rendered(results, "results/robustness.md")
    assert ("given the wall time of `encoder+recolour` (3,900 s, encoder pretraining included: 44 epochs at 88 s "
            "each): worst shift 50% against the arm's 50%, so the arm is not better") in text
    assert row.startswith("| tables of any colour (`surfaces`), best arm (`encoder+recolour`) | 96% (40%-60%) nominal; "
                          f">= 90% under 0 of {len(suite) - 1} shifts (worst: `{suite[1]['shift']}` 50%); "
                          f"the recipe without it: 74%, 0 of {len(suite) - 1}; targets missed |")


def _with_first_seed_rendered(arm: str, source_arm: str, edit, randomization: str, encoder_s: float):
    """The committed perception record with ``arm`` as ``source_arm``'s record, each of its suite's rows through
    ``edit``, its first seed alone (the others pending) and judged again; returns ``source_arm``'s record and a
    function rendering a docs template from that record (``folded``: its whitespace runs as single spaces)."""
    import perception

    results = render_docs.load_results()
    record = json.loads(json.dumps(results["perception"]))
    source = record["arms"][source_arm]
    record["arms"][arm] = dict(source, suite=[edit(row) for row in source["suite"]], randomization=randomization)
    for name in [name for name in record["arms"] if name.startswith(arm + "-seed")]:
        del record["arms"][name]
    record["encoders"][randomization] = {"views": 20000, "epochs": 8, "wall_s": encoder_s}
    record["verdicts"] = perception.judge(record)
    results["perception"] = record
    environment = render_docs.environment(results)

    def rendered(template: str, folded: bool = True) -> str:
        text = environment.get_template(template).render()
        return " ".join(text.split()) if folded else text

    return source, rendered


def _wide_lens_with(success_rate: float, guesses: int):
    """A suite row edit: under ``wide_lens``, ``success_rate`` and ``guesses`` guesses."""
    return lambda row: dict(row, success_rate=success_rate, guesses=guesses) if row["shift"] == "wide_lens" else row


def test_the_rectified_arm_renders_against_the_calibrated_arm_of_its_seed():
    import perception

    calibrated, rendered = _with_first_seed_rendered(perception.RECTIFIED_ARM, perception.CALIBRATED_ARM,
                                                     _wide_lens_with(0.97, 1), "rectified", 1500.0)
    text = rendered("results/robustness.md")
    cw = next(row for row in calibrated["suite"] if row["shift"] == "wide_lens")
    assert "### The calibrated cell that rectifies its lens" in text
    assert "Its encoder: 20,000 views of that cell, 8 epochs, 1,500 s." in text
    assert (f"`wide_lens` {round(100 * cw['success_rate'])}% with {cw['guesses']} guesses to 97% with 1, nominal "
            "100% to 100%") in text
    assert "`python benchmarks/perception.py --variant rectified` runs the others" in text
    readme = rendered("readme/results.md", folded=False)
    row = next(line for line in readme.splitlines() if "(`encoder+recolour+rectified`)" in line)
    assert row.startswith("| the calibrated cell, its lens measured too, every frame rectified to the nominal lens "
                          "(`encoder+recolour+rectified`) | seed 0: nominal 100%")


def _light_shifts_with(success_rate: float, wrong_verdicts: int):
    """A suite row edit: under the two light shifts, ``success_rate`` and ``wrong_verdicts`` wrong verdicts."""
    return lambda row: (dict(row, success_rate=success_rate,
                             failures=dict(row["failures"], wrong_verdict=wrong_verdicts))
                        if row["shift"] in ("dim_light", "bright_light") else row)


def test_the_metered_arm_renders_against_the_rectified_arm_of_its_seed():
    import perception

    rectified, rendered = _with_first_seed_rendered(perception.METERED_ARM, perception.RECTIFIED_ARM,
                                                    _light_shifts_with(0.95, 5), "metered", 1400.0)
    text = rendered("results/robustness.md")
    assert "### The rectified cell with a camera that sets its own exposure" in text
    assert "Its encoder: 20,000 views of that cell, 8 epochs, 1,400 s." in text
    light = sum(render_docs.shift_of(rectified, s)["failures"]["wrong_verdict"] for s in ("dim_light", "bright_light"))
    assert f"wrong verdicts under the two light shifts from {light} to 10," in text
    assert "`python benchmarks/perception.py --variant metered` runs the others" in text
    readme = rendered("readme/results.md", folded=False)
    assert "its lens measured too and its camera setting its own exposure (`encoder+recolour+metered`)" in readme


def test_the_highlights_arm_renders_against_the_metered_arm_of_its_seed():
    import perception

    def grey_board_at_97(row: dict) -> dict:
        return dict(row, success_rate=0.97) if row["shift"] == "grey_board" else row

    metered, rendered = _with_first_seed_rendered(perception.HIGHLIGHTS_ARM, perception.METERED_ARM,
                                                  grey_board_at_97, "highlights", 1300.0)
    text = rendered("results/robustness.md")
    assert "### The metered cell with a camera that meters the highlights" in text
    assert "Its encoder: 20,000 views of that cell, 8 epochs, 1,300 s." in text
    was = render_docs.pct(render_docs.shift_of(metered, "grey_board")["success_rate"])
    assert f"`grey_board` {was} to 97%." in text
    assert "`python benchmarks/perception.py --variant highlights` runs the others" in text
    readme = rendered("readme/results.md", folded=False)
    assert "its camera metering the parts' highlights (`encoder+recolour+highlights`)" in readme
    # `full` collects in this arm's cell: the README's limits say how far its seeds have got
    assert ("Its arm (`encoder+recolour+highlights`) has run one of the three seeds its targets need, and its last "
            "policy met them:") in rendered("readme/limits.md")


def test_the_deployed_exposure_arm_renders_against_the_same_policies_at_a_fixed_exposure():
    import perception

    rectified, rendered = _with_first_seed_rendered(perception.DEPLOYED_EXPOSURE_ARM, perception.RECTIFIED_ARM,
                                                    _light_shifts_with(0.96, 4), "rectified", 1500.0)
    text = rendered("results/robustness.md")
    assert "### The rectified policies on a camera that sets its own exposure" in text
    light = sum(render_docs.shift_of(rectified, s)["failures"]["wrong_verdict"] for s in ("dim_light", "bright_light"))
    assert f"seed by seed (seed 0): wrong verdicts under the two light shifts {light} to 8;" in text
    assert "`python benchmarks/perception.py --variant deployed-exposure` runs the others" in text
    readme = rendered("readme/results.md", folded=False)
    assert "the rectified policies on a camera setting its own exposure (`encoder+recolour+rectified+deployed" in readme


def test_the_rectified_exposure_arm_renders_against_the_rectified_arm_of_its_seed():
    import perception

    rectified, rendered = _with_first_seed_rendered(perception.RECTIFIED_EXPOSURE_ARM, perception.RECTIFIED_ARM,
                                                    _wide_lens_with(0.97, 3), "rectified", 1500.0)
    text = rendered("results/robustness.md")
    assert "### The rectified cell with frames at other exposures" in text
    wide = render_docs.shift_of(rectified, "wide_lens")["guesses"]
    assert f"guesses under `wide_lens` {wide} to 3." in text
    assert "`python benchmarks/perception.py --variant rectified-exposure` runs the others" in text
    readme = rendered("readme/results.md", folded=False)
    assert "BC on rectified frames at other exposures (`encoder+recolour+rectified+exposure`)" in readme


def _guide_examples(page: str) -> dict[str, str]:
    """A guide's ``<!-- example: NAME -->`` code blocks, by name."""
    text = (DOCS / "guides" / page).read_text()
    return dict(re.findall(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", text, flags=re.S))


def test_own_task_commands_run_from_the_folder_holding_the_module(tmp_path):
    """The guide's first command, as written (plus toy sizes), through the installed console script in a folder
    that holds only the guide's ``my_tasks.py``: ``--task module:Class`` imports from the current folder, as
    ``python -m`` would, though a console script has no current folder on its import path."""
    examples = _guide_examples("own-task.md")
    (tmp_path / "my_tasks.py").write_text(examples["my_tasks.py"])
    demo = shlex.split(examples["commands"].splitlines()[0], comments=True)
    assert demo[:3] == ["robot-rl", "demo", "--task"]
    console_script = Path(sys.executable).parent / "robot-rl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(console_script), *demo[1:], "--episodes", "1", "--frames", "1", "--image-size", "32"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "expert success 1/1" in done.stdout
    assert (tmp_path / "runs" / "demo" / "metrics.json").is_file()


def test_own_task_example_runs(tmp_path):
    """The guide's complete task example, as written: the module, then the expert on it."""
    blocks = _guide_examples("own-task.md")
    (tmp_path / "my_tasks.py").write_text(blocks["my_tasks.py"])
    done = subprocess.run([sys.executable, "-c", blocks["run"]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "expert success: True" in done.stdout


# -- defaults the hand-written pages state ----------------------------------------------------------------------
def test_a_stated_default_is_rewritten_from_the_parser_and_the_presets():
    text = ("from `--board-seed` (<!-- default: evaluate --board-seed -->7<!-- end -->), "
            "quick: <!-- preset: quick finetune --total-frames -->1<!-- end --> frames")
    filled = render_docs.fill_values(text, "page.md")
    assert "<!-- default: evaluate --board-seed -->30,000,000<!-- end -->" in filled
    assert "<!-- preset: quick finetune --total-frames -->65,536<!-- end --> frames" in filled
    assert render_docs.fill_values(filled, "page.md") == filled


@pytest.mark.parametrize(("text", "message"), [
    ("a (<!-- default: evaluate --seed -->1<!-- end -->)", "robot-rl evaluate has no option --seed"),
    ("a (<!-- default: evalute --episodes -->1<!-- end -->)", "no command robot-rl evalute"),
    ("a (<!-- preset: fast finetune --shaping -->1<!-- end -->)", "no stage finetune in a pipeline preset 'fast'"),
    ("a\n<!-- default: evaluate --episodes -->1<!-- end --> b", "begins a line"),
])
def test_a_stated_default_the_code_lacks_is_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        render_docs.fill_values(text, "page.md")


def test_a_stale_stated_default_fails_the_check(tmp_path):
    """A guide whose stated default no longer matches the parser is a page the check reports, rendered right."""
    page = tmp_path / "evaluate.md"
    page.write_text(re.sub(r"(<!-- default: evaluate --board-seed -->).*?(<!-- end -->)", r"\g<1>1\2",
                           (DOCS / "guides" / "evaluate.md").read_text()))
    rendered = render_docs.fill_values(page.read_text(), "evaluate.md")
    assert render_docs.stale({page: rendered}) == [page]
    assert "(<!-- default: evaluate --board-seed -->30,000,000<!-- end -->" in rendered
    assert DOCS / "guides" / "evaluate.md" in render_docs.render_all()  # the real page is one the check covers


def test_the_ppo_guide_names_every_default_that_differs_from_the_recipe(monkeypatch):
    # today: finetune's defaults are the recipe but for how widely it samples, which the recipe decides from its start
    assert render_docs.recipe_changes("quick", "finetune") == [
        {"flag": "--exploration", "value": "auto", "default": "default"}]
    assert {c["flag"] for c in render_docs.recipe_changes("full", "finetune")} >= {"--total-frames", "--shaping"}
    changes = [{"flag": "--shaping", "value": "1", "default": "0"}, {"flag": "--ppo-epochs", "value": "8",
                                                                     "default": "4"}]
    monkeypatch.setattr(render_docs, "recipe_changes", lambda preset, command: changes)
    results = render_docs.load_results()
    recipe = _rendered(results, "pages/ppo-recipe.md")
    commands = render_docs.environment(results).get_template("pages/ppo-commands.md").render()
    assert ("`finetune`'s own defaults differ from it in `--shaping` (0, the recipe 1), `--ppo-epochs` (4, the "
            "recipe 8): give the recipe's values") in recipe
    assert "robot-rl finetune --policy runs/bc --out runs/ppo --shaping 1 --ppo-epochs 8\n" in commands



def _rendered(results: dict, template: str) -> str:
    """``template`` rendered from ``results``, its whitespace runs made single spaces (sentences wrap anywhere)."""
    return " ".join(render_docs.environment(results).get_template(template).render().split())

def _one_seed_bc_run(preset: str, rates: list[float], frames: int, last: dict, start: dict, **record) -> dict:
    """A bc_vs_scratch results record of one seed's BC arm: checks at ``rates`` every ``frames`` frames, its last
    policy ``last`` on the fresh boards against the start ``start``, the preset's budget targets checked."""
    import bc_vs_scratch
    from protocols import PRESETS, budget_targets

    curve = [{"frames": i * frames, "success_rate": rate, "success_ci95": [rate - 0.1, rate + 0.1], "guess_rate": 0.1,
              "failures": {"guess": 5, "wrong_verdict": 2}} for i, rate in enumerate(rates)]
    summary = bc_vs_scratch.summarize({"bc": [curve]}, {"bc": [{"last": last, "best": last}]}, start, (0,), 0.74,
                                      {"bc": len(rates) * frames}, 5000, 2048)
    summary["targets"].update(budget_targets(PRESETS[preset]["budget_targets"], start, summary["final_success"]))
    return {
        **summary, "benchmark": "bc_vs_scratch", "date": "2026-12-06T00:00:00+00:00", "commit": "0" * 40,
        "argv": ["benchmarks/bc_vs_scratch.py", "--variant", f"{preset}-bc", "--seeds", "0"], "wall_s": 5000.0,
        "machine": {"cpu": "Intel Xeon", "logical_cpus": 2}, "seeds": [0], "precision": {"ran": "bf16"},
        "bc_start_metrics": {"episodes": 50},
        "ppo_config": {"eval_every": 16, "frames_per_batch": 1024, "encoder_lr": 0.0,
                       "total_frames": (len(rates) - 1) * frames},
        "table": [{"arm": "PPO from few-demo BC", "seed": 0, "last.pt, fresh boards": "91% (84-95%)"}],
        "curves": {"bc": [curve]}, **record}


def test_a_million_frame_run_renders_its_curve_where_it_stops_and_its_budget_targets():
    frames = 16_384
    rates = [0.48, 0.6, 0.7, 0.8, 0.86, 0.88, 0.9, 0.88, 0.9]
    last = {"rate": 0.91, "ci95": [0.84, 0.95], "boards": 100, "guesses": 3, "failures": {"guess": 3, "unstable": 0,
            "wrong_verdict": 6}, "by_defect": {"rotated": {"episodes": 10, "success_rate": 0.7}}}
    start = {"rate": 0.66, "ci95": [0.56, 0.74], "boards": 100, "guesses": 20}
    results = render_docs.load_results()
    results["bc_vs_scratch_few-1m"] = _one_seed_bc_run("few-1m", rates, frames, last, start)
    summary = results["bc_vs_scratch_few-1m"]
    page = _rendered(results, "results/fine-tuning.md")
    assert "## PPO to a million frames from the demo's start (the few preset)" in page
    assert "to 147,456 frames, a check on the 50 check boards every 16,384 frames; 1 of 3 seeds" in page
    # level .89 over the last two checks; the 3-check means reach .48 + .9 * .41 = .849 at the seventh check
    # (.88; the sixth's is .847)
    assert "it stops rising at **98,304 frames**" in page
    assert "| guess | 10.0 | 10.0 |" in page and "| wrong verdict | 4.0 | 4.0 |" in page
    assert "| 0 | 91% (84%-95%) | 3 | guess 3, wrong verdict 6 | rotated 7/10 |" in page
    # the kind the last quarter fails on most; no fewer than at the start, with the encoder frozen: the next lever
    assert "the checks' failures are mostly of the kind **guess** (10.0 per 100 episodes; 10.0 at the start)" in page
    assert "did not bring those failures below their start." in page
    assert "on 1 of 3 seeds so far" in page and "--variant few-1m-scratch" in page
    assert "| last policy at least 90 percent every seed at this budget | met |" in page
    assert "| last policy 40 points above start every seed | **missed** |" in page
    # the end-to-end run beside the frozen one, over the same frames (here the same curve, its budget 65,536)
    e2e = dict(results["bc_vs_scratch_few-1m"], arms={"bc": dict(summary["arms"]["bc"], budget_frames=4 * frames)})
    results["bc_vs_scratch_few-e2e"] = e2e
    page = _rendered(results, "results/fine-tuning.md")
    assert "## PPO training the encoder too, from the demo's start" in page
    # checks at 16,384-65,536 frames: .6 .7 .8 .86 (mean 74%), 2 wrong verdicts and 5 guesses of 50 boards each
    assert ("| frozen (the million-frame run) | 0 | 4 | 74% | 4.0 | 10.0 | 91% (84%-95%) after 147,456 frames |"
            in page)
    assert "Training the encoder too reached the 90% target on the fresh boards on some of its 1 seed (91%," in page
    readme = render_docs.environment(results).get_template("readme/results.md").render()
    assert ("| PPO to 147,456 frames from the 150-demo start without a pretrained encoder (1 of 3 seeds) | 66% -> "
            "91% (3 guesses) on 100 fresh boards; checks stop rising at 98,304 frames") in readme


def test_the_lead_start_with_dagger_until_flat_renders_its_rounds_and_its_stage_row():
    last = {"rate": 0.88, "ci95": [0.8, 0.93], "boards": 100, "guesses": 4, "failures": {"guess": 4,
            "wrong_verdict": 8, "no_verdict_at_view": 0, "view_never_found": 0}, "by_defect": {}}
    start = {"rate": 0.7, "ci95": [0.6, 0.78], "boards": 100, "guesses": 9}
    rounds = [{"round": i, "success_rate": rate, "guesses": 10 - i, "aggregate_frames": 5000 * (i + 1)}
              for i, rate in enumerate([0.1, 0.4, 0.62, 0.72, 0.7])]
    results = render_docs.load_results()
    results["bc_vs_scratch_lead-flat"] = _one_seed_bc_run(
        "lead-flat", [0.72, 0.8, 0.84, 0.86], 16_384, last, start,
        dagger_config={"eval_episodes": 50, "rounds": 8}, dagger_rounds={"final_round": 3, "checks": rounds},
        bc_config={"run_dir": "runs/bench-lead-flat/bc"})
    results["bc_vs_scratch_lead-flat"]["ppo_config"].update(init="runs/bench-lead-flat/dagger/rounds/round-03",
                                                            total_frames=65_536)
    page = _rendered(results, "results/fine-tuning.md")
    assert "## PPO from the lead start with DAgger until its check stops rising" in page
    assert "PPO starts from round 3's policy:" in page
    assert "| 0 | 5,000 | 10% | 10 | | 1 | 10,000 | 40% | 9 |" in page and "| 4 | 25,000 | 70% | 6 |" in page
    assert "| last policy at least 80 percent every seed at this budget | met |" in page
    assert "| last policy 30 points above start every seed at this budget | **missed** |" in page
    row = [line for line in _stage_rows(results, every_run=True) if "until its check stops rising" in line]
    assert row == ["| `lead-inspect`: 150 demos, encoder, BC, DAgger until its check stops rising (4 of at most 8 "
                   "rounds) | - | 70% | 88% | +18 | 9 -> 4 of 100 | 65,536 | 1 PPO seed, 100 fresh boards | Intel "
                   "Xeon, 2 cores, 2026-12-06, `0000000` |"]


def test_the_sampled_start_and_the_low_noise_runs_render_beside_the_dwell_runs_by_failure_kind():
    def failures(guess, never, stall, wrong):
        return {"unstable": 0, "guess": guess, "wrong_verdict": wrong, "no_verdict_at_view": stall,
                "view_never_found": never}

    def setting(name, rate, guesses, never, overrides=None):
        return {"setting": name, "overrides": overrides or {}, "rate": rate, "ci95": [rate - 0.1, rate + 0.05],
                "boards": 100, "guesses": guesses, "failures": failures(guesses, never, 3, 2), "episode_length": 30.4,
                "seconds": 60.0}

    start = {"rate": 0.84, "ci95": [0.76, 0.9], "boards": 100, "guesses": 1}
    dwell_last = {"rate": 0.74, "ci95": [0.65, 0.81], "boards": 100, "guesses": 15, "failures": failures(15, 0, 9, 2),
                  "by_defect": {}}
    calm_last = {"rate": 0.9, "ci95": [0.83, 0.94], "boards": 100, "guesses": 2, "failures": failures(2, 1, 3, 4),
                 "by_defect": {}}
    small_step_last = {"rate": 0.95, "ci95": [0.89, 0.98], "boards": 100, "guesses": 2,
                       "failures": failures(2, 0, 0, 3), "by_defect": {}}
    results = render_docs.load_results()
    for preset, last in (("lead-flat-dwell", dwell_last), ("lead-flat-low-noise", calm_last),
                         ("lead-flat-low-noise-small-step", small_step_last)):
        results[f"bc_vs_scratch_{preset}"] = _one_seed_bc_run(
            preset, [0.9, 0.92], 32_768, last, start, dagger_config={"eval_episodes": 50, "rounds": 8},
            dagger_rounds={"final_round": 4, "ppo_start_round": 4, "checks": [
                {"round": 0, "success_rate": 0.1, "guesses": 3, "aggregate_frames": 5000}]},
            bc_config={"run_dir": "runs/bench-lead-flat/bc"})
        results[f"bc_vs_scratch_{preset}"]["ppo_config"].update(
            dwell_penalty=0.05, total_frames=65_536, init="runs/bench-lead-flat/dagger/rounds/round-04")
    results["bc_vs_scratch_lead-flat-low-noise"]["trained_on"] = {"bc": {"0": {
        "sampled_success": 0.9674, "sampled_guess_rate": 0.007, "actor_update_fraction": 0.0312}}}
    results["sampled_start_lead-flat"] = {
        "benchmark": "sampled_start", "date": "2026-12-07T00:00:00+00:00", "commit": "1" * 40, "wall_s": 400.0,
        "argv": ["benchmarks/sampled_start.py", "--variant", "lead-flat"],
        "machine": {"cpu": "AMD EPYC", "logical_cpus": 2}, "preset": "lead-flat",
        "start": "runs/bench-lead-flat/dagger/rounds/round-04",
        "settings": [setting("fine-tuning's defaults", 0.16, 44, 30), setting("less noise", 0.95, 0, 1),
                     setting("deterministic", 0.94, 0, 0)]}
    page = _rendered(results, "results/fine-tuning.md")
    section = page.split("## The lead start as PPO samples it")[1].split(" ## ")[0]
    assert "| fine-tuning's defaults | 16% (6%-21%) | 44 | 30 | 3 | 2 | 30 |" in section
    assert "| deterministic | 94% (84%-99%) | 0 | 0 | 3 | 2 | 30 |" in section
    assert ("Under fine-tuning's defaults the sampled start succeeds on 16% of the boards where the deterministic "
            "start succeeds on 94%: sampled as PPO samples its batches, the start guesses on 44 boards and never "
            "finds the view on 30 of 100, where its deterministic policy, the one every check reads, does so on 0 "
            "and 0") in section
    section = page.split("## PPO from the lead start with DAgger until its check stops rising, with less exploration "
                         "noise")[1].split(" ## ")[0]
    assert "--pose-scale-factor 0.1" in section
    assert "| 0 | the dwell runs' | 74% (65%-81%) | 15 | 9 | 2 | 0 | - | - | - |" in section  # no training record
    assert "| 0 | less exploration noise | 90% (83%-94%) | 2 | 3 | 4 | 1 | 97% | 1% | 3% |" in section
    assert "| last policy at least 80 percent every seed at this budget | met |" in section
    row = [line for line in _stage_rows(results, every_run=True) if "the dwell runs' start and penalty" in line]
    assert row and "| 84% | 90% | +6 | 1 -> 2 of 100 | 65,536 |" in row[0]
    limits = _rendered(results, "readme/limits.md")
    assert ("From a start built the same way (four rounds: 84% on 100 fresh boards), PPO "
            "sampling close to it (`--exploration low`) ended at 95% (one PPO seed) with 2 guesses per 100 boards "
            "after 65,536 frames (its targets missed: last policy 30 points above start every seed)") in limits
    section = page.split("## PPO from the lead start with DAgger until its check stops rising, with less exploration "
                         "noise and a smaller step")[1].split(" ## ")[0]
    assert ("the PCB runs at this step met their targets. Met: the `quick` preset fine-tunes with `--exploration auto`"
            in section)
    row = [line for line in _stage_rows(results, every_run=True)
           if "`lead-inspect`: the same, PPO's learning rate a tenth" in line]
    assert row and "| 84% | 95% | +11 | 1 -> 2 of 100 | 65,536 |" in row[0]


def test_the_less_noise_runs_from_the_other_starts_render_what_ppo_stepped_and_where_each_seed_fell():
    failures = {"unstable": 0, "guess": 40, "wrong_verdict": 3, "no_verdict_at_view": 0, "view_never_found": 0}
    start = {"rate": 0.95, "ci95": [0.89, 0.98], "boards": 100, "guesses": 3, "failures": dict(failures, guess=3)}
    last = {"rate": 0.5, "ci95": [0.4, 0.6], "boards": 100, "guesses": 40, "failures": failures, "by_defect": {}}
    results = render_docs.load_results()
    for name in ("demo-low-noise-small-step", "lead-quick-low-noise"):
        results.pop(f"bc_vs_scratch_{name}", None)
    run = _one_seed_bc_run("demo-low-noise", [0.88, 0.6, 0.3, 0.5], 4_096, last, start,
                           dagger_config={"eval_episodes": 50, "rounds": 8}, dagger_rounds=None,
                           bc_config={"run_dir": "runs/bench-demo-flat/bc"})
    run["curves"]["bc"][0][2]["guess_rate"] = 0.66  # the lowest check, 30% at 8,192 frames
    run["ppo_config"].update(ppo_epochs=8, frames_per_batch=1024, minibatch_size=256, total_frames=65_536,
                             dwell_penalty=0.05, init="runs/bench-demo-flat/bc")
    run["trained_on"] = {"bc": {"0": {"sampled_success": 0.5, "sampled_guess_rate": 0.4,
                                      "actor_update_fraction": 0.0312}}}
    results["bc_vs_scratch_demo-low-noise"] = run
    page = _rendered(results, "results/fine-tuning.md")
    section = page.split("## PPO from the start `make demo` builds, with less exploration noise")[1].split(" ## ")[0]
    assert "PPO took 3% of its planned actor steps here, about one of the 32 an iteration plans" in section
    assert "seed 0 30% at 8,192 frames (66% guesses)." in section
    assert "| 0 | less exploration noise | 50% (40%-60%) | 40 | 0 | 3 | 0 | 50% | 40% | 3% |" in section
    row = [line for line in _stage_rows(results, every_run=True) if "PPO sampling with less exploration noise" in line
           and "pcb-inspect" in line]
    assert row and "| 95% | no round needed | 50% | -45 | 3 -> 40 of 100 | 65,536 |" in row[0]


def test_the_dwell_run_renders_its_last_policies_beside_the_lead_runs_without_the_penalty_by_failure_kind():
    results = render_docs.load_results()
    plain = results["bc_vs_scratch_lead-encoder-1m"]
    last = {"rate": 0.9, "ci95": [0.83, 0.94], "boards": 100, "guesses": 4,
            "failures": {"guess": 4, "wrong_verdict": 5, "no_verdict_at_view": 1, "view_never_found": 0, "unstable": 0}}
    arms = {"bc": {**plain["arms"]["bc"], "final_success": {"0": last}}}
    results["bc_vs_scratch_lead-dwell-1m"] = {
        **plain, "arms": arms, "final_success": {"0": last}, "seeds": [0, 1],
        "argv": ["benchmarks/bc_vs_scratch.py", "--variant", "lead-dwell-1m-bc", "--seeds", "0"],
        "ppo_config": {**plain["ppo_config"], "dwell_penalty": 0.05}}
    page = _rendered(results, "results/fine-tuning.md")
    page = page.split("## PPO to a million frames from the lead start, waiting at the view made to cost")[1]
    page = page.split(" ## ")[0]  # the dwell run's section
    assert "with `--dwell-penalty 0.05`" in page
    f = plain["arms"]["bc"]["final_success"]["0"]
    assert (f"| 0 | 0 | {render_docs.rate_ci(f)} | {f['failures']['no_verdict_at_view']} | {f['guesses']} | "
            f"{f['failures']['wrong_verdict']} | {f['failures']['view_never_found']} |") in page
    assert f"| 0 | 0.05 | {render_docs.rate_ci(last)} | 1 | 4 | 5 | 0 |" in page
    # a seed the dwell run lists but has not finished gets no row, neither its own nor the plain run's
    assert "| 1 | 0.05 |" not in page and "| 1 | 0 |" not in page
    assert "then scratch" not in page  # no scratch arm for this preset


def test_the_guess_ce_run_renders_beside_the_dwell_run_and_names_the_seeds_it_has_not_run():
    results = render_docs.load_results()
    dwell = results["bc_vs_scratch_lead-dwell-1m"]
    last = {"rate": 0.91, "ci95": [0.84, 0.95], "boards": 100, "guesses": 3,
            "failures": {"guess": 3, "wrong_verdict": 6, "no_verdict_at_view": 0, "view_never_found": 0, "unstable": 0}}
    results["bc_vs_scratch_lead-guess-1m"] = {
        **dwell, "arms": {"bc": {**dwell["arms"]["bc"], "final_success": {"1": last}}}, "seeds": [1],
        "final_success": {"1": last},
        "argv": ["benchmarks/bc_vs_scratch.py", "--variant", "lead-guess-1m-bc", "--seeds", "1"],
        "ppo_config": {**dwell["ppo_config"], "guess_ce_weight": 1.0},
        "targets": {**dwell["targets"], "at_most_10_guesses_per_100_every_seed_at_this_budget": True}}
    page = _rendered(results, "results/fine-tuning.md")
    page = page.split("## PPO to a million frames from the lead start, 'continue' taught on every guess")[1]
    page = page.split(" ## ")[0]
    alone = dwell["arms"]["bc"]["final_success"]
    assert f"| 1 | 0 | {render_docs.rate_ci(alone['1'])} | {alone['1']['guesses']} |" in page
    assert f"| 1 | 1.0 | {render_docs.rate_ci(last)} | 3 | 0 | 6 | 0 |" in page
    assert "| 0 | 0 |" not in page  # a seed not run with the term gets no row
    assert (f"Not yet run with the cross-entropy: seeds 0 and 2, whose last policies with the dwell penalty alone "
            f"guessed on {alone['0']['guesses']} and {alone['2']['guesses']} of 100 boards.") in page
    assert any("'continue' taught on every guess besides (`--guess-ce-weight 1`)" in row
               for row in _stage_rows(results, every_run=True))


def test_the_stalls_at_the_view_render_with_their_answer_probabilities_and_camera_travel():
    results = render_docs.load_results()
    decoding = dict(results["verdict_decoding_lead-encoder-1m"])
    decoding["stalls"] = {"0": {"episodes": [
        {"steps_at_view": 30, "p_answer_max": 0.42, "p_answer_median": 0.009, "travel_mm_per_step": 6.5}]},
        "1": {"episodes": [
            {"steps_at_view": 60, "p_answer_max": 0.06, "p_answer_median": 0.002, "travel_mm_per_step": 4.7},
            {"steps_at_view": 40, "p_answer_max": 0.25, "p_answer_median": 0.003, "travel_mm_per_step": 6.0}]}}
    results["verdict_decoding_lead-encoder-1m"] = decoding
    page = _rendered(results, "results/fine-tuning.md")
    assert ("On the steps at the view of the 3 episodes the mode reading leaves there without a verdict, p(answer "
            "now) peaked between 6.0% and 42.0% (median 25.0%) and sat at a median of 0.3%, and the camera moved a "
            "median 6.0 mm per step there: the deterministic pose does not come to rest at the view.") in page
    decoding["stalls"] = {"0": {"episodes": []}}
    page = _rendered(results, "results/fine-tuning.md")
    assert "episodes the mode reading leaves there" not in page


def test_the_readme_names_the_cell_full_collects_in_and_its_arm():
    import perception

    from robot_rl import pipeline

    results = render_docs.load_results()
    cell = pipeline.PRESETS["full"].collect.randomization
    readme = render_docs.environment(results).get_template("readme/results.md").render()
    marked = re.findall(r"\(`([^`]+)`, now `full`'s\)", readme)
    assert marked == [perception.recipe_arm(cell)]  # one row is full's: its cell's arm, adopted by the rule
    assert results["perception"]["arms"][marked[0]]["randomization"] == cell
    limits = _rendered(results, "readme/limits.md")
    assert f'a calibrated cell (`randomization="{cell}"`)' in limits and f"(`{marked[0]}`)" in limits
    assert "camera mount" not in limits and "shifted camera" not in limits


def test_the_known_limits_state_the_figures_of_their_results_files():
    import copy

    import perception

    from robot_rl import pipeline

    results = copy.deepcopy(render_docs.load_results())
    # a second few-1m seed, a seed of full's recipe that misses a shift, the lead runs at other figures
    results["bc_vs_scratch_few-1m"]["seeds"] = [0, 1]
    record = results["perception"]
    arm = perception.recipe_arm(pipeline.PRESETS["full"].collect.randomization)
    seeds = render_docs.seeds_of(record["arms"], arm)
    for seed in seeds:  # every shift at 90%+ and 3 guesses at most, but bright light at 80% with 7
        for row in seed["suite"][1:]:
            row.update(success_rate=max(row["success_rate"], 0.9), guesses=min(row["guesses"], 3))
        render_docs.shift_of(seed, "bright_light").update(success_rate=0.8, guesses=7)
    record["verdicts"] = perception.judge(record)
    dwell = results["bc_vs_scratch_lead-dwell-1m"]["arms"]["bc"]["final_success"]
    for seed, (rate, guesses) in {"0": (0.85, 9), "1": (0.76, 15), "2": (0.57, 9)}.items():
        dwell[seed].update(rate=rate, guesses=guesses)
    limits = _rendered(results, "readme/limits.md")
    assert "run to a million frames (two seeds so far)" in limits
    assert ("its last policies missed the targets fixed before they ran" if len(seeds) >= 3 else
            f"has run {render_docs.NUMBER_WORDS[len(seeds)]} of the three seeds its targets need") in limits
    assert "every shift of the suite at 80% or more, at most 7 guesses per 100 boards under any shift" in limits
    assert ("at 16x the frames, waiting at the view costing 0.05 a step, a start like it reached 85%, 76% and 57% "
            "(three PPO seeds) with 9, 15 and 9 guesses per 100 boards") in limits
    results.pop("bc_vs_scratch_lead-dwell-1m")
    assert "at 16x the frames" not in _rendered(results, "readme/limits.md")  # without the million-frame file
    assert render_docs.and_list(["a"]) == "a" and render_docs.and_list(["a", "b", "c"]) == "a, b and c"
    assert render_docs.span([0.96, 0.99, 0.98]) == "96-99%" and render_docs.span([1.0, 1.0]) == "100%"


def test_a_budget_runs_scratch_arm_renders_its_censored_bound_and_the_bc_arm_under_todays_name():
    import bc_vs_scratch

    frames, budget = 16_384, 4 * 16_384
    def curve(rates):
        return [{"frames": i * frames, "success_rate": rate, "success_ci95": [0.0, 1.0], "guess_rate": 0.1,
                 "failures": {"guess": 5, "wrong_verdict": 2}} for i, rate in enumerate(rates)]
    last = {"rate": 0.85, "ci95": [0.77, 0.91], "boards": 100, "guesses": 0}
    never = {"rate": 0.0, "ci95": [0.0, 0.04], "boards": 100, "guesses": 1}
    start = {"rate": 0.66, "ci95": [0.56, 0.74], "boards": 100, "guesses": 20}
    # BC+PPO reaches tau (74%) at 16,384 frames; scratch never does in its 65,536
    summary = bc_vs_scratch.summarize(
        {"bc": [curve([0.5, 0.8, 0.8, 0.8, 0.8])], "scratch": [curve([0.0] * 5)]},
        {"bc": [{"last": last, "best": last}], "scratch": [{"last": never, "best": never}]}, start, (0,), 0.74,
        {"bc": budget, "scratch": budget}, 2186, 2048)
    assert summary["ratio"] is None and summary["ratio_lower_bound"] == 4.0
    results = render_docs.load_results()
    results["bc_vs_scratch_few-1m"] = {
        **summary, "benchmark": "bc_vs_scratch", "date": "2026-12-06T00:00:00+00:00", "commit": "0" * 40,
        "argv": ["benchmarks/bc_vs_scratch.py", "--variant", "few-1m-scratch", "--seeds", "0"], "wall_s": 5000.0,
        "machine": {"cpu": "Intel Xeon", "logical_cpus": 2}, "seeds": [0], "precision": {"ran": "bf16"},
        "bc_start_metrics": {"episodes": 50}, "bc_config": {},
        "ppo_config": {"eval_every": 16, "frames_per_batch": 1024, "encoder_lr": 0.0, "total_frames": budget},
        "table": [{"arm": "PPO from few-demo BC", "seed": 0}, {"arm": "PPO from scratch", "seed": 0}],
        "curves": {"bc": [curve([0.5, 0.8, 0.8, 0.8, 0.8])], "scratch": [curve([0.0] * 5)]}}
    page = _rendered(results, "results/fine-tuning.md")
    assert ("up to 65,536 frames, 1 seed: it never reaches tau, so the ratio is censored at **>= 4.0x** (BC+PPO's "
            "median frames to tau: 16,384; >= 3.5x counting the 2,186 demonstration frames as BC's). Its last policy "
            "on the fresh boards: 0% (0%-4%), 1 guess.") in page
    assert "| PPO from the BC start | 0 |" in page and "| PPO from scratch | 0 |" in page
    assert "few-demo BC | 0 |" not in page
    assert render_docs.BC_ARM_LABEL == bc_vs_scratch.ARM_LABELS["bc"]
    readme = render_docs.environment(results).get_template("readme/results.md").render()
    assert "PPO from scratch never reaches tau in 65,536 frames: >= 4.0x (censored)" in readme
    index = _rendered(results, "results/index.md")
    assert "to a million frames (1 of 3 seeds): scratch never reaches tau, **>= 4.0x** (censored)" in index


def _demo_result(after_dagger: dict | None, runs: int, dagger_stage: bool) -> dict:
    bc = {"success_rate": 0.3, "guesses": 9, "episodes": 50}
    ppo = {"success_rate": 0.84, "guesses": 1, "episodes": 50}
    return {"machine": {"cpu": "AMD EPYC", "logical_cpus": 2}, "date": "2026-12-06T00:00:00+00:00",
            "commit": "a" * 40, "after_bc": bc, "after_dagger": after_dagger, "after_ppo": ppo,
            "parts": {"pretrain": 1.0, **({"dagger": 1.0} if dagger_stage else {})},
            "preset": {"finetune": {"total_frames": 65536}},
            "runs": [{"after_bc": bc, "after_ppo": ppo}] * runs}


def _benchmark_result(start: float, finals: list[float]) -> dict:
    return {"machine": {"cpu": "Intel Xeon", "logical_cpus": 2}, "date": "2026-12-06T00:00:00+00:00",
            "commit": "b" * 40, "seeds": list(range(len(finals))), "ppo_config": {"total_frames": 65536},
            "start_fresh_boards": {"rate": start, "guesses": 40, "boards": 100},
            "final_success": {str(seed): {"rate": rate, "guesses": 3} for seed, rate in enumerate(finals)}}


def _stage_rows(results: dict, every_run: bool = False) -> list[str]:
    """The stage table's rows: the README's, or with ``every_run`` the fine-tuning page's (one per run)."""
    template = ('{% import "partials/stage_rows.md" as stages with context %}{{ stages.stage_table(false) }}'
                if every_run else '{% include "readme/stages.md" %}')
    text = render_docs.environment(results).from_string(template).render()
    return [line for line in text.splitlines() if line.startswith("| `") or line.startswith("| a task")]


def test_the_readme_stage_table_says_what_each_stage_added_and_renders_without_the_optional_files():
    results = {"quick_demo": _demo_result(None, runs=1, dagger_stage=True),
               "bc_vs_scratch_few": _benchmark_result(0.45, [0.86, 0.83]),
               "bc_vs_scratch_lead-encoder": _benchmark_result(0.27, [0.45])}
    demo, few, lead = _stage_rows(results)
    assert "| 30% | no round needed | 84% | +54 | 9 -> 1 of 50 | 65,536 | 1 run of `make demo`, 50 boards |" in demo
    assert "| 45% | not run | 86%, 83% | +41, +38 | 40 -> 3, 3 of 100 | 65,536 | 2 PPO seeds, 100 fresh boards |" in few
    assert "| - | 27% | 45% | +18 |" in lead and "1 PPO seed," in lead  # the lead start is measured after DAgger

    results["quick_demo"] = _demo_result(None, runs=3, dagger_stage=False)  # --dagger off: no stage at all
    results["quick_demo_lead-inspect"] = _demo_result({"success_rate": 0.5, "guesses": 4, "episodes": 50}, runs=1,
                                                      dagger_stage=True)
    rows = _stage_rows(results)
    assert len(rows) == 4 and "| not run | 84% | +54 |" in rows[0] and "| 3 runs of `make demo`" in rows[0]
    assert "| 30% | 50% | 84% | +34 | 4 -> 1 of 50 |" in rows[2]  # PPO's lift from DAgger's policy

    # make demo's start as a benchmark builds it: its DAgger stage (auto) ran no round, then one that ran rounds
    staged = dict(_benchmark_result(0.9, [0.93, 0.91, 0.95]), dagger_config={"rounds": 2},
                  bc_config={"run_dir": "runs/bench-demo/bc"})
    staged["ppo_config"] = dict(staged["ppo_config"], init="runs/bench-demo/bc")
    results["bc_vs_scratch_demo"] = staged
    assert len(_stage_rows(results)) == 4  # a lever's run is the fine-tuning page's row, not the README's
    rows = _stage_rows(results, every_run=True)
    assert len(rows) == 5 and "`make demo`'s start" in rows[1]
    assert "| 90% | no round needed | 93%, 91%, 95% | +3, +1, +5 | 40 -> 3, 3, 3 of 100 |" in rows[1]
    staged["ppo_config"] = dict(staged["ppo_config"], init="runs/bench-demo/dagger/round_2")
    assert "| - | 90% | 93%, 91%, 95% |" in _stage_rows(results, every_run=True)[1]


def test_the_limits_speak_of_a_demo_measured_without_native_bf16_by_its_slowest_run():
    import copy

    results = render_docs.load_results()
    demo = copy.deepcopy(results["quick_demo"])
    demo["precision"] = {**demo["precision"], "ran": "fp32", "native_bf16": False}
    run = demo["runs"][0]
    demo["runs"] = [{**run, "pipeline_s": seconds, "after_ppo": {**run["after_ppo"], "success_rate": 0.9}}
                    for seconds in (1000.0, 1200.0, 1100.0)]
    results["quick_demo"] = demo
    limits = _rendered(results, "readme/limits.md")
    assert ("The quick demo's last policy meets its 80% target on three runs, but on two cores without native bf16 "
            "(fp32) its slowest pipeline took 20.0 minutes, over the 15-minute target") in limits
    assert "docs/history.md#the-demo-before-exploration-auto" in limits
    demo["runs"][1]["after_ppo"] = {**run["after_ppo"], "success_rate": 0.7}
    limits = _rendered(results, "readme/limits.md")
    assert "The quick demo's last policy misses its 80% target on three runs" in limits


def test_the_lead_pipeline_section_reads_the_round_cap_rule_against_its_run():
    import copy

    results = copy.deepcopy(render_docs.load_results())
    demo = results["quick_demo_lead-inspect"]
    demo.update(dagger_rounds=4, exploration="low")
    demo["after_ppo"].update(success_rate=0.9, guesses=5, episodes=50)  # 10 guesses per 100: at the bound
    demo["failures"]["after_ppo"]["no_verdict_at_view"] = 2
    page = _rendered(results, "results/arms-tasks.md")
    assert "DAgger ran four rounds of at most 8; fine-tuning sampled with `low` exploration" in page
    assert "Here: 90%, 5 guesses and 2 at the view in 50: met, so the pipeline takes it." in page
    demo["after_ppo"]["guesses"] = 6  # 12 per 100
    page = _rendered(results, "results/arms-tasks.md")
    assert "6 guesses and 2 at the view in 50: **missed**, so the quick stage keeps its two rounds." in page
