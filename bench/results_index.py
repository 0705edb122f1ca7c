"""Write bench/results/README.md (``python bench/results_index.py``): each result file, the command recorded in it (or beside it) and the
commit that last wrote it."""
import json, re, subprocess, sys
from pathlib import Path
REPO = Path(__file__).resolve().parents[1]
RES = REPO / "bench" / "results"
def command_of(p: Path):
    if p.is_dir():
        return None
    if p.suffix == ".json":
        try:
            d = json.loads(p.read_text())
            if isinstance(d, dict):
                for k in ("command", "cmd"):
                    if isinstance(d.get(k), str):
                        return d[k]
                    if isinstance(d.get(k), list):
                        return " ".join(map(str, d[k]))
                meta = d.get("meta") or d.get("params") or {}
                if isinstance(meta, dict) and isinstance(meta.get("command"), str):
                    return meta["command"]
        except Exception:   # noqa: BLE001 - not a JSON object: look beside it
            pass
        md = p.with_suffix(".md")
        if md.exists():
            return command_of(md)
    stem = p.name.split(".")[0]
    side = RES / f"{stem}.command.txt"
    if side.exists() and side != p:
        return side.read_text().strip().splitlines()[0]
    if p.suffix in (".md", ".txt", ".log"):
        text = p.read_text(errors="replace")[:6000]
        for pattern in (r"(python3? (?:-m treegen|bench/\S+)[^`\n]*)", r"`(treegen \w+[^`\n]*)`", r"(treegen \w+ [^`\n]*)"):
            m = re.search(pattern, text)
            if m:
                return m.group(1).strip()
    if p.suffix == ".jsonl":
        return "(rows of the run named in " + f"{stem}.command.txt" + ")" if side.exists() else None
    return None
rows = []
for p in sorted(RES.iterdir()):
    if p.name == "README.md":
        continue
    commit = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h", "--", str(p.relative_to(REPO))],
                            capture_output=True, text=True).stdout.strip() or "(this commit)"
    cmd = command_of(p)
    cmd = (cmd or "(not recorded in the file)").replace("|", "\\|")
    if len(cmd) > 220:
        cmd = cmd[:217] + "..."
    rows.append(f"| `{p.name}{'/' if p.is_dir() else ''}` | `{cmd}` | {commit} |")
text = ["# bench/results", "",
        "One current result per benchmark. Each file, the command that produced it (as recorded in the file, or in",
        "its `.command.txt`), and the commit that last wrote it (`git log -1 -- FILE`). Superseded partial runs",
        "were removed (git keeps them): `vicinal_bench_part2..4` (inputs of `vicinal_bench_combined`) and",
        "`vicinal_bench_800_a` / `_b` (inputs of `vicinal_bench_800_combined`), at commit 46d96b2 / ae497c8.",
        "Regenerate this index with `python bench/results_index.py`.", "",
        "| file | command | commit |", "|---|---|---|"] + rows
(RES / "README.md").write_text("\n".join(text) + "\n")
print(len(rows), "files")
