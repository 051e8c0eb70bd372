"""`convert` over real Git repositories holding Entire checkpoints (tests/entire_repos.py): the tables written."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest

import batch
import batch.sources.entire as source
from batch.cli import main
from batch.errors import SourceError
from batch.formats import entire_checkpoint
from batch.sources.entire import checkpoint as entire_checkpoint_tree
from batch.sources.entire import load as entire_load
from batch.sources.git import open_repository, read_blob
from entire_repos import (
    GEMINI, S1, S2, S3, S4, ULID, WHOLE, build_scenario, commit, fixture, git, init, meta, root_meta,
)
from conftest import timeless

CODEX_ETF = "019f9261-846e-7fc0-b843-e0464227f290"  # bbef1c2a76a9: Codex with transcript.jsonl
CODEX_ULID = "01a082cd-8bed-71c2-89f1-161a92f4ae0b"  # the ULID checkpoint: Codex with transcript.jsonl
CODEX_BARE = "019dc116-c183-74f3-8f98-b4e5bd8eddfa"  # b5a37dc3d0fe: Codex, full.jsonl only
CORRUPT = "f0f0f0f0f0f0/0"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return build_scenario(tmp_path_factory.mktemp("entire"))


@pytest.fixture(scope="module")
def converted(scenario, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "out"
    result = batch.convert([scenario["work"]], out)
    return result, out


def table(out, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / name / "*.parquet")


def same_rows(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """The same rows, in any order (parts of different batches come in another order)."""
    a, b = timeless(a), timeless(b)
    keys = [c for c in a.columns if not isinstance(a.schema[c], pl.List)]
    return a.sort(keys, nulls_last=True).equals(b.sort(keys, nulls_last=True))


def sql(out, query: str) -> list[tuple]:
    with duckdb.connect() as con:
        for name in ("sessions", "records", "losses", "vcs_events", "lineage", "usage_summaries", "inferences",
                     "source_lines", "checkpoint_sessions", "checkpoints", "checkpoint_commits", "tool_calls"):
            con.execute(f"create view {name} as select * from read_parquet('{out}/{name}/*.parquet')")
        return con.sql(query).fetchall()


def checkpoint_trees(repo) -> dict[str, dict[str, str]]:
    """Tree path -> blob ID of every file on each checkpoint ref, listed by `git` (not by our reader)."""
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/entire/checkpoints", "refs/entire/checkpoints")
    trees = {}
    for ref in refs.splitlines():
        entries = (line.split("\t", 1) for line in git(repo, "ls-tree", "-r", ref).splitlines())
        trees[ref] = {path: info.split()[2] for info, path in entries}
    return trees


def stored_token_usage(repo) -> dict[tuple[str, str], dict]:
    """The token_usage of every session metadata.json blob, by (session ID, checkpoint ID), read with `git show`."""
    found = {}
    for ref, tree in checkpoint_trees(repo).items():
        for path in tree:
            parts = path.split("/")
            if parts[-1] != "metadata.json" or len(parts) < 2 or not parts[-2].isdigit():
                continue  # not a session folder's metadata (a checkpoint's summary)
            try:
                data = json.loads(git(repo, "show", f"{ref}:{path}"))
            except json.JSONDecodeError:  # f0f0f0f0f0f0's corrupt blob: a loss, no usage
                continue
            if "token_usage" in data:
                # the shard path on the branch, the ref's last component on a per-checkpoint ref
                cid = "".join(parts[:-2]) or ref.rsplit("/", 1)[1]
                # b5a37dc3d0fe is on the branch and under its own ref: both copies agree
                assert found.setdefault((data["session_id"], cid), data["token_usage"]) == data["token_usage"]
    return found


def test_claude_code_full_jsonl_goes_through_the_claude_code_converter(converted):
    _, out = converted
    (row,) = sql(out, f"select agent, producer_method, producer_source, content_level, meta, source_files, record_count "
                      f"from sessions where session_key = '{S1}'")
    assert row[:4] == ("claude-code", "converter", "claude-code-jsonl", "redacted")
    assert json.loads(row[4]) == {"io.entire/checkpoint": "c0ffee000001"}  # the newest checkpoint of S1
    assert row[5] == ["work/c0ffee000001/0/full.jsonl"]
    # the three chunks joined: 6 legacy lines and 3 more, each line a record (summary lines included)
    assert sql(out, f"select count(*) from source_lines where session_key = '{S1}'") == [(9,)]
    assert sql(out, f"select max(source_line) from records where session_key = '{S1}'") == [(9,)]
    assert sql(out, f"select count(*) from records where session_key = '{S1}' and native_type = 'user' "
                    "and native like '%\"line 2\"%'") == [(1,)]


def test_subagent_under_tasks_is_a_stream_spawned_by_the_tool_use(converted):
    _, out = converted
    (row,) = sql(out, "select session_key, stream_kind, parent_session_key, content_level, meta from sessions "
                      "where stream_kind = 'subagent'")
    assert row[:4] == (f"{S1}/a1b2", "subagent", S1, "redacted")
    assert json.loads(row[4]) == {"io.entire/checkpoint": "c0ffee000001", "io.entire/tool_use_id": "toolu_01ABC"}
    assert sql(out, "select session_key, relation, parent_session_key, call_id, evidence, evidence_detail from lineage") == [
        (f"{S1}/a1b2", "spawned_by", S1, "toolu_01ABC", "native_structure", "entire.tasks"),
    ]
    assert sql(out, f"select count(*) from source_lines where session_key = '{S1}/a1b2'") == [(1,)]


def test_etf_fallback_for_codex_with_its_losses_and_a_usage_summary(scenario, converted):
    _, out = converted
    (row,) = sql(out, f"select agent, producer_method, producer_source, content_level, record_count from sessions "
                      f"where session_key = '{CODEX_ETF}'")
    assert row[:4] == ("codex", "import", "entire-transcript", "redacted")
    etf = [json.loads(line) for line in fixture("v1branch_etf_codex.jsonl").splitlines()]
    results = [b for line in etf if isinstance(line["content"], list) for b in line["content"] if "result" in b]
    assert row[4] == len(etf) + len(results)  # a record per line, and one per result inlined into its tool_use
    losses = dict(sql(out, f"select category, count from losses where session_key = '{CODEX_ETF}'"))
    assert {"reasoning", "inference.model", "per_call_usage"} <= set(losses)
    # no token field in Codex ETF: no per-call usage, the metadata token_usage is the summary
    assert sql(out, f"select count(*) from inferences where session_key = '{CODEX_ETF}'") == [(0,)]
    summary = sql(out, f"select scope, is_latest, input_uncached_tokens, output_total_tokens, cache_read_tokens "
                       f"from usage_summaries where session_key = '{CODEX_ETF}'")
    usage = stored_token_usage(scenario["work"])[CODEX_ETF, "bbef1c2a76a9"]
    assert summary == [("checkpoint", True, usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"])]


def test_usage_summaries_are_the_token_usage_of_the_metadata_blobs(scenario, converted):
    _, out = converted
    stored = stored_token_usage(scenario["work"])
    # only the Codex sessions record token_usage, and none has per-call usage: one summary per checkpoint
    assert {session for session, _ in stored} == {CODEX_ETF, CODEX_ULID, CODEX_BARE}
    rows = sql(out, "select session_key, native, scope, is_latest, input_uncached_tokens, output_total_tokens, "
                    "cache_read_tokens, cache_write_tokens from usage_summaries")
    got = {(key, json.loads(native)["_meta"]["io.entire/checkpoint"]): (json.loads(native)["token_usage"], *cols)
           for key, native, *cols in rows}
    assert len(got) == len(rows) and got == {
        k: (u, "checkpoint", True, u["input_tokens"], u["output_tokens"], u["cache_read_tokens"],
            u["cache_creation_tokens"]) for k, u in stored.items()}
    # checkpoint_sessions holds the same blobs: token_usage as stored, and its columns
    rows = sql(out, "select session_key, checkpoint_id, token_usage, input_tokens, output_tokens, cache_read_tokens, "
                    "cache_creation_tokens, api_call_count from checkpoint_sessions where token_usage is not null")
    got = {(key, cid): (json.loads(usage), *cols) for key, cid, usage, *cols in rows}
    assert len(got) == len(rows) and got == {
        k: (u, u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["cache_creation_tokens"],
            u["api_call_count"]) for k, u in stored.items()}


def test_gemini_with_and_without_transcript_jsonl(converted):
    _, out = converted
    rows = dict((k, v) for k, *v in sql(
        out, f"select session_key, agent, producer_source, record_count from sessions where session_key in ('{S4}', '{GEMINI}')"))
    assert rows[S4] == ["gemini-cli", "entire-transcript", 1]
    assert rows[GEMINI] == ["gemini-cli", None, 0]  # its full.jsonl is one JSON document, not JSONL
    (loss,) = sql(out, f"select category, detail from losses where session_key = '{GEMINI}' and category like 'entire.%'")
    assert loss[0] == "entire.unsupported_agent" and "agent Gemini CLI" in loss[1]
    # the pretty-printed full.jsonl is never fed to the Claude Code converter
    assert sql(out, "select count(*) from source_lines where source_file like '%/2/full.jsonl'") == [(0,)]


def test_session_without_a_usable_transcript_is_still_a_session_row_with_a_loss(converted):
    _, out = converted
    assert sql(out, f"select agent, record_count, producer_method from sessions where session_key = '{CODEX_BARE}'") == [
        ("codex", 0, None)]
    assert sql(out, f"select category from losses where session_key = '{CODEX_BARE}' and category like 'entire.%'") == [
        ("entire.unsupported_agent",)]
    # the deleted blob of S3: a sessions row, and a loss naming checkpoint, folder and path
    assert sql(out, f"select record_count from sessions where session_key = '{S3}'") == [(0,)]
    (detail,) = sql(out, f"select detail from losses where session_key = '{S3}' and category = 'entire.missing_blob'")
    assert detail[0].startswith("checkpoint e0e0e0e0e0e0, session folder 0, e0/e0e0e0e0e0/0/full.jsonl: blob ")


def test_hash_mismatch_and_corrupt_metadata_are_losses_and_the_rest_is_converted(converted):
    _, out = converted
    assert sql(out, f"select category from losses where session_key = '{S2}' and category like 'entire.%'") == [
        ("entire.hash_mismatch",)]
    assert sql(out, f"select record_count from sessions where session_key = '{S2}'") == [(1,)]
    assert sql(out, f"select category from losses where session_key = '{CORRUPT}' and category like 'entire.%'") == [
        ("entire.corrupt_metadata",)]
    assert sql(out, f"select record_count from sessions where session_key = '{CORRUPT}'") == [(1,)]


def test_commits_with_trailers_are_vcs_records(converted, scenario):
    _, out = converted
    c = scenario["commits"]
    rows = sql(out, "select commit_id, session_key, action, evidence, native_field, native from vcs_events "
                    "order by commit_id, session_key nulls first")
    got = {(commit, key): json.loads(native)["_meta"]["io.entire/checkpoint"]
           for commit, key, action, evidence, field, native in rows
           if action == "commit" and evidence == "reported" and field == "Entire-Checkpoint"}
    assert len(got) == len(rows)
    assert got == {
        (c["c1"], S1): "4c02af2759b6",
        # one commit, two trailers: every session of both checkpoints
        (c["c2"], S1): "c0ffee000001", (c["c2"], GEMINI): "c0ffee000001", (c["c2"], CODEX_ULID): ULID,
        # a trailer naming a checkpoint the repository lacks: a commit record without a session, and a loss
        (c["c3"], None): "0123456789ab",
    }
    assert all(len(commit) == 40 for commit, *_ in rows)
    (loss,) = sql(out, "select detail from losses where category = 'entire.absent_checkpoint'")
    assert c["c3"] in loss[0] and "0123456789ab" in loss[0]
    assert sql(out, "select commit_id, checkpoint_id, is_checkpoint_present from checkpoint_commits "
                    "where not is_checkpoint_present") == [(c["c3"], "0123456789ab", False)]


def test_checkpoint_tables_are_written(converted):
    _, out = converted
    assert sql(out, "select count(*) from checkpoints") == [(9,)]
    assert sql(out, f"select checkpoint_id, is_selected, checkpoint_transcript_start from checkpoint_sessions "
                    f"where session_key = '{S1}' order by checkpoint_id") == [
        ("4c02af2759b6", False, None), ("c0ffee000001", True, 6)]


def test_manifest_names_provenance_and_reports_the_import(converted):
    result, _ = converted
    m = result.manifest
    (entry,) = [i for i in m["inputs"].parse() if i["path"] == "work/c0ffee000001/0/full.jsonl"]
    assert [p["tree_path"] for p in entry["provenance"]] == [
        "c0/ffee000001/0/full.jsonl", "c0/ffee000001/0/full.jsonl.001", "c0/ffee000001/0/full.jsonl.002"]
    assert entry["provenance"][0]["ref"] == "refs/heads/entire/checkpoints/v1"
    assert entry["size"] == len(WHOLE) - 1
    assert "no redaction counts" in m["export_report"].parse()["entire"]["redaction_counts"]
    (repo,) = m["entire"]["repositories"]
    assert (repo["repository"], repo["checkpoints"], repo["sessions"], repo["commit_trailers"]) == ("work", 9, 9, 4)
    assert m["entire"]["source_losses"] == {
        "entire.absent_checkpoint": 1, "entire.corrupt_metadata": 1, "entire.hash_mismatch": 1,
        "entire.missing_blob": 1, "entire.missing_session_folder": 1, "entire.unsupported_agent": 2,
    }


def test_all_checkpoints_write_shared_records_once(scenario, converted, tmp_path):
    _, newest = converted
    out = tmp_path / "all"
    batch.convert([scenario["work"]], out, all_checkpoints=True)
    query = f"select record_id, seq, source_line from records where session_key = '{S1}' order by seq"
    assert sql(out, query) == sql(newest, query)  # the older checkpoint's 6 lines are the same records
    assert sql(out, "select count(*) from records group by record_id having count(*) > 1") == []
    assert sql(out, f"select checkpoint_id, is_selected, checkpoint_transcript_start from checkpoint_sessions "
                    f"where session_key = '{S1}' order by checkpoint_id") == [
        ("4c02af2759b6", True, None), ("c0ffee000001", True, 6)]
    # which records each checkpoint covered: the newest from line 7 (checkpoint_transcript_start 6, 0-based)
    assert sql(out, "select count(*) from records r join checkpoint_sessions c on c.session_key = r.session_key "
                    "where c.checkpoint_id = 'c0ffee000001' and r.source_line > c.checkpoint_transcript_start") == [(3,)]


def test_diverging_checkpoint_is_a_loss(tmp_path):
    repo = init(tmp_path / "repo")

    def checkpoint(cid: str, full: bytes, when: str) -> dict:
        base = f"{cid[:2]}/{cid[2:]}"
        return {f"{base}/metadata.json": root_meta(cid, ["0"], base=base),
                f"{base}/0/metadata.json": meta(session_id=S2, agent="Claude Code", created_at=when),
                f"{base}/0/full.jsonl": full}

    first = b'{"type":"user","sessionId":"' + S2.encode() + b'","uuid":"u-1","message":{"content":"a"}}\n'
    other = b'{"type":"user","sessionId":"' + S2.encode() + b'","uuid":"u-2","message":{"content":"b"}}\n'
    commit(repo, "refs/heads/entire/checkpoints/v1", {
        **checkpoint("aaaaaaaaaaa1", first, "2026-01-01T00:00:00Z"),
        **checkpoint("aaaaaaaaaaa2", other + first, "2026-01-02T00:00:00Z"),
    }, "checkpoints")
    out = tmp_path / "out"
    batch.convert([repo], out, all_checkpoints=True)
    assert sql(out, "select category, detail from losses where category like 'entire.%'") == [
        ("entire.checkpoint_diverges", "checkpoint aaaaaaaaaaa1, session folder 0, aa/aaaaaaaaa1/0: its full.jsonl is "
         "not a prefix of the newest checkpoint's (aaaaaaaaaaa2): records only it holds are not converted")]


@pytest.mark.parametrize("kind", ["bare", "mirror"])
def test_bare_clone_and_mirror_are_imported(scenario, converted, kind, tmp_path):
    _, work_out = converted
    out = tmp_path / "out"
    batch.convert([scenario[kind]], out)
    # refs/entire/* are not cloned by --bare; --mirror keeps them. The deleted blob is present in both.
    keys = {k for (k,) in sql(out, "select session_key from sessions")}
    assert S3 in keys and sql(out, f"select record_count from sessions where session_key = '{S3}'") == [(1,)]
    assert (CODEX_ULID in keys) == (kind == "mirror")
    query = f"select record_id, seq from records where session_key = '{S1}' order by seq"
    assert sql(out, query) == sql(work_out, query)


def test_mixed_run_reports_one_usage_per_inference(scenario, tmp_path):
    projects = tmp_path / "projects" / "-Users-x-cli"
    projects.mkdir(parents=True)
    (projects / f"{S1}.jsonl").write_bytes(WHOLE)  # the same session, also on disk
    out = tmp_path / "out"
    result = batch.convert([tmp_path / "projects", scenario["work"]], out)
    # the only responses of the scenario are S1's: one inference per message.id, held by file and checkpoint
    lines = [json.loads(line) for line in WHOLE.splitlines()]
    responses = {line["message"]["id"] for line in lines if line["type"] == "assistant"}
    (n,) = sql(out, "select count(*) from inferences")[0]
    assert n == sql(out, "select count(distinct inference_id) from inferences")[0][0] == len(responses)
    assert sql(out, "select count(*) from inferences group by inference_id having count(*) > 1") == []
    # one stream, held by the file and by the checkpoint; both copies are in source_lines
    (row,) = sql(out, f"select source_files from sessions where session_key = '{S1}'")
    assert sorted(row[0]) == ["projects/-Users-x-cli/" + f"{S1}.jsonl", "work/c0ffee000001/0/full.jsonl"]
    paths = {i["path"] for i in result.manifest["inputs"].parse()}
    assert {f"projects/-Users-x-cli/{S1}.jsonl", "work/c0ffee000001/0/full.jsonl"} <= paths
    # the same tables whatever the order the sources are given in
    other = tmp_path / "other"
    batch.convert([scenario["work"], tmp_path / "projects"], other, batch_bytes=1)
    for name in ("sessions", "records", "inferences", "inference_observations", "losses", "source_lines"):
        assert same_rows(table(out, name), table(other, name)), name


def test_output_is_the_same_whatever_the_batch_size(scenario, converted, tmp_path):
    _, out = converted
    small = tmp_path / "small"
    batch.convert([scenario["work"]], small, batch_bytes=1, workers=2)
    for name in ("sessions", "records", "losses", "vcs_events", "usage_summaries", "source_lines"):
        assert same_rows(table(out, name), table(small, name)), name


def test_cli_imports_with_a_summary_line_and_exit_0(scenario, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["convert", "--entire", str(scenario["work"]), "--out", str(tmp_path / "out")])
    assert exc.value.code == 0
    printed = capsys.readouterr().out
    assert ("Entire work: 9 checkpoints, 9 sessions, 4 commit trailers; source losses 7 "
            "(missing objects 2, corrupt JSON 1, other 4)") in printed


def test_a_repository_without_checkpoints_is_an_error(tmp_path):
    repo = init(tmp_path / "repo")
    with pytest.raises(SourceError, match=r"no Entire checkpoints found in .*repo: looked for the entire/checkpoints/v1"):
        batch.convert([repo], tmp_path / "out")
    with pytest.raises(SourceError, match="not a Git repository"):
        batch.convert([], tmp_path / "out", entire=[tmp_path])



def test_a_repository_named_twice_is_imported_once(scenario, tmp_path):
    work = scenario["work"]
    result = batch.convert([work, work / ".git"], tmp_path / "out", entire=[work])
    assert [r["repository"] for r in result.manifest["entire"]["repositories"]] == ["work"]
    assert result.tables["checkpoints"] == 9
    assert sql(tmp_path / "out", "select count(*) from records group by record_id having count(*) > 1") == []


def test_discovery_reads_metadata_only_and_a_unit_reads_its_own_session(scenario, monkeypatch):
    scan = source.scan_checkpoints(open_repository(scenario["work"]))
    transcripts = {
        f.blob_id for c in scan.checkpoints for s in c.sessions
        for f in [*s.files.values(), *s.chunks, *(t for task in s.tasks for t in task.transcripts)]
        if f.path.rsplit("/", 1)[-1].startswith(("full.jsonl", "transcript.jsonl", "agent-"))
    }
    read: list[str] = []

    def spy(repo, oid):
        read.append(str(oid))
        return read_blob(repo, oid)

    # where the scan (a checkpoint's tree) and the load of a session look read_blob up
    monkeypatch.setattr(entire_checkpoint_tree, "read_blob", spy)
    monkeypatch.setattr(entire_load, "read_blob", spy)
    found = entire_checkpoint.discover(scenario["work"])
    # every transcript on the checkpoint refs, as `git ls-tree` lists them
    assert transcripts == {oid for tree in checkpoint_trees(scenario["work"]).values() for path, oid in tree.items()
                           if path.rsplit("/", 1)[-1].startswith(("full.jsonl", "transcript.jsonl", "agent-"))}
    # metadata.json and task.json blobs only: no transcript is read before its batch runs
    assert read and not transcripts & set(read)
    (unit,) = [u for u in found.units if u.owner == S2]
    read.clear()
    loaded = unit.load()
    assert [s.data for s in loaded.streams] == [b'{"type":"user","sessionId":"' + S2.encode() + b'","uuid":"u-1"}\n']
    assert len(read) == 2 and len(transcripts & set(read)) == 1  # its full.jsonl, and content_hash.txt
