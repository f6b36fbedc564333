/**
 * The test suite's runner (issue 17 item 10). Each test file runs in a process of its own, as
 * `node --test` runs it (each file already makes its own database), but in two lanes, so the 2-core
 * machine is not overcommitted: the browser files (Chromium, the app and a worker each) one at a
 * time, and every other file two at a time beside them. The longest files start first, so the last
 * minutes are not one long file running alone.
 *
 *   node --import tsx scripts/run-tests.ts [files…]
 *
 * Knobs: VERBATIM_TEST_LANES="browser=1,other=2". Prints a line per file as it ends, the whole
 * output of every file that failed, then the summary: files, tests, pass, fail, skipped, the wall
 * time and the sum of the files' times. Exits 1 when anything failed.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * Files measured at well over a minute (CI at f8857e8), started first in their lane. The others
 * follow in name order. A file missing here is only started later, never skipped.
 */
const LONG = [
  'test/web-outbox-end.test.ts',
  'test/web-app.test.ts',
  'test/web-outbox.test.ts',
  'test/web-reasons.test.ts',
  'test/web-captions.test.ts',
  'test/web-api.test.ts',
  'test/late-audio.test.ts',
  'test/crash-recovery.test.ts',
  'test/meeting-stream.test.ts',
  'test/live.test.ts',
  'test/worker-death.test.ts',
  'test/upload-pipeline.test.ts',
  'test/db-restart.test.ts',
  'test/bot-workers.test.ts',
  'test/delivery-recovery.test.ts',
];

type Lane = 'browser' | 'other';
const laneOf = (file: string): Lane => (path.basename(file).startsWith('web-') ? 'browser' : 'other');

interface Outcome {
  file: string;
  code: number | null;
  seconds: number;
  tests: number;
  pass: number;
  fail: number;
  skipped: number;
  output: string;
}

function lanes(): Record<Lane, number> {
  const out: Record<Lane, number> = { browser: 1, other: 2 };
  for (const part of (process.env.VERBATIM_TEST_LANES ?? '').split(',').filter(Boolean)) {
    const [name, n] = part.split('=');
    if ((name === 'browser' || name === 'other') && Number(n) >= 1) out[name] = Number(n);
    else throw new Error(`VERBATIM_TEST_LANES: "${part}" is not browser=N or other=N`);
  }
  return out;
}

/** The last value of a `# name N` summary line of node's TAP output. */
function count(output: string, name: string): number {
  const all = [...output.matchAll(new RegExp(`^# ${name} (\\d+)$`, 'gm'))];
  return all.length > 0 ? Number(all[all.length - 1]![1]) : 0;
}

function runFile(file: string): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', '--test-reporter=tap', '--test-concurrency=1', file],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.on('close', (code) => {
      resolve({
        file,
        code,
        seconds: (performance.now() - started) / 1000,
        tests: count(output, 'tests'),
        pass: count(output, 'pass'),
        fail: count(output, 'fail'),
        skipped: count(output, 'skipped'),
        output,
      });
    });
  });
}

async function main(): Promise<void> {
  const given = process.argv.slice(2);
  const files = (
    given.length > 0
      ? given
      : fs
          .readdirSync(path.join(ROOT, 'test'))
          .filter((f) => f.endsWith('.test.ts'))
          .map((f) => `test/${f}`)
  ).sort((a, b) => {
    const ra = LONG.indexOf(a);
    const rb = LONG.indexOf(b);
    return (ra < 0 ? LONG.length : ra) - (rb < 0 ? LONG.length : rb) || a.localeCompare(b);
  });
  const width = lanes();
  const started = performance.now();
  const outcomes: Outcome[] = [];
  const queue: Record<Lane, string[]> = {
    browser: files.filter((f) => laneOf(f) === 'browser'),
    other: files.filter((f) => laneOf(f) === 'other'),
  };
  process.stdout.write(
    `running ${files.length} test files: ${queue.browser.length} browser files ${width.browser} at a time, ` +
      `${queue.other.length} others ${width.other} at a time, side by side (${os.cpus().length} CPUs)\n`,
  );
  const worker = async (lane: Lane): Promise<void> => {
    for (let file = queue[lane].shift(); file; file = queue[lane].shift()) {
      const o = await runFile(file);
      outcomes.push(o);
      const ok = o.code === 0 && o.fail === 0;
      process.stdout.write(
        `${ok ? 'ok  ' : 'FAIL'} ${o.file.padEnd(40)} ${String(o.tests).padStart(4)} tests ` +
          `${o.fail > 0 ? `${o.fail} failed ` : ''}${o.seconds.toFixed(1).padStart(7)} s\n`,
      );
    }
  };
  const running: Promise<void>[] = [];
  for (const lane of ['browser', 'other'] as const)
    for (let i = 0; i < width[lane]; i++) running.push(worker(lane));
  await Promise.all(running);

  const failed = outcomes.filter((o) => o.code !== 0 || o.fail > 0);
  for (const o of failed) {
    process.stdout.write(`\n======== ${o.file} (exit ${o.code}) ========\n${o.output}\n`);
  }
  const sum = (k: 'tests' | 'pass' | 'fail' | 'skipped') => outcomes.reduce((a, o) => a + o[k], 0);
  const wall = (performance.now() - started) / 1000;
  const busy = outcomes.reduce((a, o) => a + o.seconds, 0);
  process.stdout.write(
    [
      '',
      `# files ${outcomes.length}`,
      `# tests ${sum('tests')}`,
      `# pass ${sum('pass')}`,
      `# fail ${sum('fail')}`,
      `# skipped ${sum('skipped')}`,
      `# files failed ${failed.length}${failed.length > 0 ? `: ${failed.map((o) => o.file).join(' ')}` : ''}`,
      `# wall ${wall.toFixed(0)} s, sum of the files' times ${busy.toFixed(0)} s (${(busy / wall).toFixed(2)}× in parallel)`,
      '',
    ].join('\n'),
  );
  process.exitCode = failed.length > 0 ? 1 : 0;
}

await main();
