import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { ALL_SETTINGS, ConfigError, loadConfig } from '../src/config.ts';
import { README, readmeWithSettings, settingsRegion } from '../scripts/settings-table.ts';

void it('Settings: the README settings tables are the ones the declaration in src/config.ts produces (npm run docs:settings)', async () => {
  const readme = fs.readFileSync(README, 'utf8');
  const expected = await readmeWithSettings(readme);
  const lines = settingsRegion(readme).split('\n');
  const wanted = settingsRegion(expected).split('\n');
  const stale = wanted.filter((line) => !lines.includes(line));
  const extra = lines.filter((line) => !wanted.includes(line));
  assert.deepEqual(
    { stale, extra },
    { stale: [], extra: [] },
    'README.md settings tables are out of date: run `npm run docs:settings`',
  );
  assert.equal(settingsRegion(readme), settingsRegion(expected), 'and in the same order');
  for (const s of ALL_SETTINGS) assert.ok(readme.includes(`\`${s.env}\``), `${s.env} is in the README`);
});

void it('Settings: each variable is declared once, with a line for the README, and every default is a value it takes', () => {
  const names = ALL_SETTINGS.map((s) => s.env);
  assert.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    'no variable is declared twice',
  );
  for (const s of ALL_SETTINGS) {
    assert.match(s.env, /^(VERBATIM_[A-Z0-9_]+|DATABASE_URL)$/, s.env);
    assert.ok(s.help.length > 0 && !s.help.includes('\n'), `${s.env} has a one-line description`);
    assert.ok(s.internal || s.group !== undefined, `${s.env} is in a README group`);
  }
  // The shipped defaults all parse (loadConfig({}) runs each default through its kind).
  assert.doesNotThrow(() => loadConfig({}));
});

void it('Settings: a value a setting does not take is refused with an error naming its variable', () => {
  const bad: Record<string, string> = {
    VERBATIM_PORT: 'eighty',
    VERBATIM_LEASE_SECONDS: '0.1',
    VERBATIM_MAX_RECLAIMS: '1.5',
    VERBATIM_LOG_LEVEL: 'loud',
    VERBATIM_DRAFTS: 'yes',
    VERBATIM_LATE_AUDIO_DAYS: '-1',
    VERBATIM_BOT_LOOKBACK_HOURS: '0',
    VERBATIM_EMBEDDED_PG_PORT: '70000',
    VERBATIM_EGRESS_ALLOW: '10.0.0.0/33',
    VERBATIM_RECALL_LIMITS: 'bot.create=0',
    VERBATIM_TRANSCRIPTION_CONCURRENCY: '0',
    VERBATIM_ISOLATED_RUN: '{"kind":1}',
  };
  for (const [name, value] of Object.entries(bad)) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (err: unknown) => err instanceof ConfigError && err.message.includes(name),
      `${name}=${value}`,
    );
  }
  // Durations are read in their unit and kept in milliseconds.
  const c = loadConfig({
    VERBATIM_LEASE_SECONDS: '2.5',
    VERBATIM_HEARTBEAT_SECONDS: '1',
    VERBATIM_LATE_AUDIO_DAYS: '0.5',
    VERBATIM_BOT_LOOKBACK_HOURS: '2',
  });
  assert.deepEqual([c.leaseMs, c.lateAudioMs, c.bots.lookbackMs], [2_500, 43_200_000, 7_200_000]);
  assert.deepEqual(c.givenSettings, {
    VERBATIM_LEASE_SECONDS: '2.5',
    VERBATIM_HEARTBEAT_SECONDS: '1',
    VERBATIM_LATE_AUDIO_DAYS: '0.5',
    VERBATIM_BOT_LOOKBACK_HOURS: '2',
  });
});

void it('Settings: in src, only src/config.ts reads process.env', () => {
  const src = path.resolve(import.meta.dirname, '..', 'src');
  const readers = fs
    .readdirSync(src, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.tsx?$/.test(f) && f !== 'config.ts')
    .filter((f) => /process\.env\b/.test(fs.readFileSync(path.join(src, f), 'utf8')));
  assert.deepEqual(readers, []);
});
