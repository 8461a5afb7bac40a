#!/usr/bin/env python3
"""Prints the build directories of an Evolution run's seed (generation's kernel, the run's first variant)
and of the best of its last round, space-separated. Usage: scripts/evolve_kernels.py STORE RUN_ID."""
import sqlite3, sys
db, run = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
path = 'SELECT c.artifact_path FROM evolution_variants v JOIN candidates c ON c.id = v.candidate_id WHERE v.id = ?'
seed = db.execute('SELECT MIN(id) FROM evolution_variants WHERE run_id = ?', (run,)).fetchone()[0]
best = db.execute('SELECT best_id FROM evolution_rounds WHERE run_id = ? ORDER BY round DESC LIMIT 1', (run,)).fetchone()[0]
print(db.execute(path, (seed,)).fetchone()[0], db.execute(path, (best,)).fetchone()[0])
