/**
 * P2: `verbatim doctor` as an operator runs it: the CLI in its own process against a real database,
 * Debian's ffmpeg and PocketSphinx, and a real data dir; each fault made for real (a binary that is
 * not there, a port nobody listens on, a read-only file system, a short token).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from './support/db.ts';
import { spawnVerbatim } from './support/harness.ts';

let db: TestDatabase;
let dir: string;

before(async () => {
  db = await createTestDatabase();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-doctor-'));
});
after(async () => {
  await db.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the doctor; its exit code and its lines by verdict. */
async function doctor(env: Record<string, string>) {
  const run = spawnVerbatim(['doctor'], { DATABASE_URL: db.appUrl, VERBATIM_DATA_DIR: dir, ...env });
  const code = await run.exited;
  const lines = run.output().split('\n');
  const with_ = (mark: string) => lines.filter((l) => l.startsWith(mark));
  return { code, output: run.output(), faults: with_('FAULT'), warnings: with_('WARN'), oks: with_('ok ') };
}

/** Makes `target` read-only as root can feel it: a read-only tmpfs over it, else the immutable flag. */
function makeReadOnly(target: string): () => void {
  fs.mkdirSync(target, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', target], { stdio: 'pipe' });
    return () => execFileSync('umount', [target]);
  } catch {
    execFileSync('chattr', ['+i', target]);
    return () => execFileSync('chattr', ['-i', target]);
  }
}

void describe('verbatim doctor', () => {
  void it('P2: on a good install it checks settings, ffmpeg, the recogniser, database, storage, clock and disk, and exits 0', async () => {
    const r = await doctor({ VERBATIM_METRICS_TOKEN: 'a-long-enough-metrics-token' });
    assert.equal(r.code, 0, r.output);
    assert.deepEqual(r.faults, [], r.output);
    for (const check of [
      /^ok\s+settings\s/,
      /^ok\s+metrics token\s+set, 27 characters/,
      /^ok\s+egress\s/,
      /^ok\s+ffmpeg\s+the allowlist's 7 demuxers present/,
      /^ok\s+database\s+PostgreSQL \d+/,
      /^ok\s+database roles\s+the login verbatim_app_test owns nothing/,
      /^ok\s+migrations\s+all \d+ applied/,
      /^ok\s+clock\s/,
      /^ok\s+storage\s+.*takes a write and a delete/,
      /^ok\s+storage quota\s/,
      /^ok\s+recogniser \(pocketsphinx\)\s+heard ".*budget.*"/,
      /^(ok|WARN)\s+disk\s+data dir /,
    ]) {
      assert.ok(
        r.oks.concat(r.warnings).some((l) => check.test(l)),
        `no line like ${check}:\n${r.output}`,
      );
    }
    assert.match(r.output, /\nno faults/);
    // The probe object it wrote is gone again, with the blob root it had to make: nothing is left.
    assert.equal(fs.existsSync(path.join(dir, 'blobs')), false, 'no blob root left behind');
  });

  void it('P2: with ffmpeg missing, the database down, storage read-only or the metrics token short, it names each fault and exits 1', async () => {
    const ffmpeg = await doctor({ VERBATIM_FFMPEG_PATH: path.join(dir, 'no-such-ffmpeg') });
    assert.equal(ffmpeg.code, 1, ffmpeg.output);
    assert.ok(
      ffmpeg.faults.some((l) => /ffmpeg\s+not found: ".*no-such-ffmpeg"/.test(l)),
      ffmpeg.output,
    );
    assert.match(ffmpeg.output, /fix: install Debian's ffmpeg/);
    // The others still ran.
    assert.ok(
      ffmpeg.oks.some((l) => /^ok\s+migrations/.test(l)),
      ffmpeg.output,
    );

    const down = await doctor({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/verbatim' });
    assert.equal(down.code, 1, down.output);
    assert.equal(down.faults.length, 1, down.output);
    assert.match(down.faults[0]!, /database\s+DATABASE_URL does not answer: .*ECONNREFUSED/);
    assert.match(down.output, /fix: start PostgreSQL, or correct DATABASE_URL/);
    assert.ok(
      down.oks.some((l) => /^ok\s+recogniser/.test(l)),
      down.output,
    );

    const undo = makeReadOnly(path.join(dir, 'blobs'));
    let readOnly;
    try {
      readOnly = await doctor({});
    } finally {
      undo();
    }
    assert.equal(readOnly.code, 1, readOnly.output);
    assert.equal(readOnly.faults.length, 1, readOnly.output);
    assert.match(readOnly.faults[0]!, /storage\s+.*blobs refused a write: .*(EROFS|EPERM|read-only)/);
    assert.match(readOnly.output, /fix: give the service's user write access to the data dir/);

    const token = await doctor({ VERBATIM_METRICS_TOKEN: 'short' });
    assert.equal(token.code, 1, token.output);
    assert.equal(token.faults.length, 1, token.output);
    assert.match(token.faults[0]!, /settings\s+VERBATIM_METRICS_TOKEN must be at least 16 characters/);
    assert.doesNotMatch(token.output, /short/, 'the token itself is never printed');
    // The bad token is left out; every other check ran on the remaining settings.
    assert.ok(
      token.oks.some((l) => /^ok\s+storage\s/.test(l)),
      token.output,
    );

    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-doctor-none-'));
    try {
      const none = await doctor({ DATABASE_URL: '', VERBATIM_DATA_DIR: fresh });
      assert.equal(none.code, 1, none.output);
      assert.ok(
        none.faults.some((l) => /database\s+no DATABASE_URL and no embedded database in .* yet/.test(l)),
        none.output,
      );
      assert.equal(fs.existsSync(path.join(fresh, 'pg')), false, 'the doctor made no database');
    } finally {
      fs.rmSync(fresh, { recursive: true, force: true });
    }
  });
});
