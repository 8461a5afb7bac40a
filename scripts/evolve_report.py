#!/usr/bin/env python3
"""The table of scripts/evolve_experiment.sh: per operator the gap before and after Evolution (as the search
measured it and re-measured back to back), the aggregate time, Adams2019 and the hidden set. Usage:
scripts/evolve_report.py OUT_DIR [OUT_DIR...] (one table over the operators of every directory, each with its
own store: experiments run as parallel workers; an operator in several, the last one's)."""
import json, math, os, sqlite3, sys
runs = []  # (out dir, store, operator)
for out in sys.argv[1:]:
    db = sqlite3.connect(os.path.join(out, 'evo.db'))
    runs += [(out, db, l.split()[0]) for l in open(os.path.join(out, 'progress.txt')) if l.strip() and l.split()[0] != 'done']
# An operator in several directories (a re-run, say with a newer binary): the last directory's run counts.
last = {op: i for i, (_, _, op) in enumerate(runs)}
runs = [r for i, r in enumerate(runs) if last[r[2]] == i]

def find_cases(o):
    if isinstance(o, dict):
        if isinstance(o.get('cases'), list) and o['cases'] and 't_cand_s' in o['cases'][0]:
            return o
        for v in o.values():
            r = find_cases(v)
            if r: return r
    return None

rows, halved, beat, both, tb, ta = [], 0, 0, 0, 0.0, 0.0
print('| operator | track after | rounds | stop | efficiency before → after | gap before → after | gap ratio | total s before → after | re-measured gap ratio | vs Adams2019 | hidden |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
hidden_scores, hidden_pass, hidden_total, rm_halved, rm_n = [], 0, 0, 0, 0
for out, db, op in runs:
    try:
        d = json.load(open(os.path.join(out, op + '.evolve.json')))
    except Exception as e:
        print(f'| {op} | failed: {e} |'); continue
    ev = d.get('evolution')
    if not ev:
        print(f'| {op} | no evolution |'); continue
    b, a = ev['before'], ev['after']
    gb, ga = 1 - b['mean_efficiency'], 1 - a['mean_efficiency']
    if ga <= gb / 2: halved += 1
    tb += b['total_s']; ta += a['total_s']
    run = ev['run']
    best = db.execute('select best_id from evolution_rounds where run_id=? order by round desc limit 1', (run,)).fetchone()[0]
    res = json.loads(db.execute('select result_json from evolution_variants where id=?', (best,)).fetchone()[0])
    evo_cases = {c['id']: c for c in res['cases']}
    adams = ''
    try:
        ad = find_cases(json.load(open(os.path.join(out, op + '.adams.json'))))
        ratios = []
        for c in ad['cases']:
            e = evo_cases.get(c['id'])
            if c['verdict'] == 'pass' and e and e['verdict'] == 'pass' and c['t_cand_s'] > 0 and e['t_cand_s'] > 0:
                ratios.append(c['t_cand_s'] / e['t_cand_s'])
        if ratios:
            g = math.exp(sum(map(math.log, ratios)) / len(ratios))
            both += 1; beat += g > 1
            adams = f'{g:.2f}× on {len(ratios)}/{len(ad["cases"])} cases'
        else:
            adams = f'passes 0/{len(ad["cases"])} cases'
    except Exception:
        adams = 'does not build'
    rm = hid = ''
    try:
        sb = find_cases(json.load(open(os.path.join(out, op + '.seed_std.json'))))
        sa = find_cases(json.load(open(os.path.join(out, op + '.best_std.json'))))
        r = (1 - sa['mean_efficiency']) / (1 - sb['mean_efficiency'])
        rm = f'{1 - sb["mean_efficiency"]:.3f} → {1 - sa["mean_efficiency"]:.3f} ({r:.2f})'
        rm_n += 1; rm_halved += r <= 0.5
        h = find_cases(json.load(open(os.path.join(out, op + '.hidden.json'))))
        hidden_scores.append(h['score']); hidden_pass += h['passed']; hidden_total += h['total']
        hid = f'{h["score"]:.1f}, {h["passed"]}/{h["total"]}'
    except Exception:
        pass
    print(f'| {op} | {ev["track"]} | {len(ev["rounds"]) - 1} | {ev["stop_reason"]} | {b["mean_efficiency"]:.3f} → {a["mean_efficiency"]:.3f} | '
          f'{gb:.3f} → {ga:.3f} | {ga / gb:.2f} | {b["total_s"]:.4g} → {a["total_s"]:.4g} | {rm} | {adams} | {hid} |')
n = len(runs)
print(f'\ngap halved on {halved} of {n} (re-measured: {rm_halved} of {rm_n}); aggregate time {tb:.4g} s → {ta:.4g} s; beats Adams2019 on {beat} of {both} operators both run')
if hidden_scores:
    print(f'hidden set: mean score {sum(hidden_scores) / len(hidden_scores):.1f} over {len(hidden_scores)} operators; {hidden_pass}/{hidden_total} cases pass')
