"""The compare / demo table says how many test users each bucket's Recall@20 rests on."""

from dpmt.apps import compare


def _metrics(recall, users, bucket_users):
    buckets = [{"recall@20": recall, "ndcg@20": recall / 2, "users": n, "random_recall@20": 0.05,
                "min_count": b, "max_count": b + 1} for b, n in enumerate(bucket_users)]
    return {"overall": {"recall@20": recall, "ndcg@20": recall / 2, "users": users,
                        "random_recall@20": 0.01}, "buckets": buckets}


def _rows(users_by_seed):
    rows = []
    for seed, (users, bucket_users) in enumerate(users_by_seed):
        for name, r in (("DP uniform", 0.25), ("private popularity", 0.12)):
            rows.append(compare._row(name, seed, 5.0, None, _metrics(r, users, bucket_users),
                                     1.0, 0.0))
    return rows


def test_the_last_row_gives_the_test_users_of_each_bucket():
    table = compare.format_table(compare.summarise(_rows([(931, [34, 77, 207])])))
    last = table.splitlines()[-1]
    assert last.startswith("| test users with a target |")
    assert [c.strip() for c in last.strip("|").split("|")] == \
        ["test users with a target", "–", "931", "–", "34", "77", "207"]
    # over seeds, the mean count (the seeds' test sets differ)
    table = compare.format_table(compare.summarise(_rows([(931, [34, 77, 207]),
                                                          (920, [35, 80, 200])])))
    cells = [c.strip() for c in table.splitlines()[-1].strip("|").split("|")]
    assert cells[2] == "925.5" and cells[4:] == ["34.5", "78.5", "203.5"]


def test_summary_md_explains_how_to_read_a_difference(tmp_path):
    rows = _rows([(931, [34, 77, 207])])
    table = compare.write_outputs(rows, tmp_path, "t")
    assert compare.READING_NOTE in table
    assert compare.READING_NOTE in (tmp_path / "summary.md").read_text()


def test_rows_from_before_the_counts_still_make_a_table():
    # cells.json written by an older version has no user counts: no row, no note
    rows = _rows([(931, [34, 77, 207])])
    for r in rows:
        for k in [k for k in r if k.endswith("users")]:
            del r[k]
    table = compare.format_table(compare.summarise(rows))
    assert "test users with a target" not in table
    assert table.splitlines()[-1].startswith("| random ranking")
