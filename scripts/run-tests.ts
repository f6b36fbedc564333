/**
 * The test suite's runner (issue 17 item 10). Each test file runs in a process of its own, as
 * `node --test` runs it (each file already makes its own database), three at a time, but never two
 * browser files (Chromium, the app and a worker each) at once, so the 2-core machine is not
 * overcommitted by them. Most files wait on processes, timers and the database more than they
 * compute, which is why three fit on two cores. The longest files start first, so the last minutes
 * are not one long file running alone. Measured on 2 CPUs with the same 65 files (2026-12-04): one
 * at a time 1,498 s wall and 861 CPU-s; three at a time 745 s and 829 CPU-s; four at a time 803 s
 * and 1,008 CPU-s (the fourth file's processes contend for the CPUs more than they wait).
 *
 *   node --import tsx scripts/run-tests.ts [files…]
 *
 * Knobs: VERBATIM_TEST_SLOTS (3), VERBATIM_TEST_BROWSERS (1), VERBATIM_TEST_FILE_TIMEOUT_SECONDS (1200). Prints each file's whole TAP output and a line
 * as it ends, the files by time, then the summary: files, tests, pass, fail, skipped, the files that
 * failed, the wall time and the sum of the files' times. Exits 1 when anything failed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { builtCliIsFresh } from './built-cli.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * Files measured at more than half a minute (the whole suite at 4ed9628, 2 CPUs), longest first;
 * they start first. The others follow in name order. A file missing here is only started later.
 */
const LONG = [
  // live-end, live-close-out and live were one file of 481 s; started together, their recognisers
  // contend for the same two CPUs, so other long files go between them.
  'test/live-end.test.ts',
  // P1: 20 s with podman's layers cached; the first build on a machine (debootstrap, Debian's
  // packages, npm ci) takes about 4 minutes, mostly waiting on the network, so it starts early.
  'test/image.test.ts',
  'test/meeting-stream.test.ts', // 196 s
  'test/web-app.test.ts', // 159 s
  'test/live-close-out.test.ts',
  'test/web-outbox.test.ts', // 149 s
  'test/crash-recovery.test.ts', // 127 s
  'test/live.test.ts',
  'test/bot-webhooks.test.ts', // 102 s
  'test/chunk-cost.test.ts', // 101 s
  'test/webhook-fairness.test.ts', // 190 s in a full run (2026-12-07)
  'test/webhooks.test.ts', // 120 s in a full run
  'test/rolling-upgrade.test.ts', // 75 s alone: the previous release compiled, a live meeting
  'test/backup.test.ts', // 50 s alone
  'test/people.test.ts', // 115 s in a full run
  'test/playback.test.ts', // 110 s in a full run
  'test/web-outbox-end.test.ts', // 86 s
  'test/late-audio.test.ts', // 84 s
  'test/storage.test.ts', // 65 s
  'test/minutes.test.ts', // 64 s
  'test/failure-classification.test.ts', // 47 s
  'test/bot-recovery.test.ts', // 45 s
  'test/delivery-recovery.test.ts', // 44 s
  'test/resumable-split.test.ts', // 41 s
  'test/isolation.test.ts', // 40–60 s
  'test/split-memory.test.ts', // 30–40 s beside other files
  'test/worker-death.test.ts', // 40 s
  'test/bot-workers.test.ts', // 39 s
  'test/cli.test.ts', // 39 s
  'test/operator.test.ts', // 37 s
];

/** A file still running after this long is stuck: it is killed and counted as failed. */
const FILE_TIMEOUT_S = knob('VERBATIM_TEST_FILE_TIMEOUT_SECONDS', 1200);

type Lane = 'browser' | 'other';
/** A file that starts Chromium is a browser file. */
const laneOf = (file: string): Lane =>
  fs.readFileSync(path.join(ROOT, file), 'utf8').includes('launchChromium(') ? 'browser' : 'other';

interface Outcome {
  file: string;
  code: number | null;
  seconds: number;
  tests: number;
  pass: number;
  fail: number;
  skipped: number;
  /** User + system CPU seconds of the file's processes (those waited for), from bash's `times`. */
  cpu: number;
  output: string;
}

function knob(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: "${raw}" is not a whole number of at least 1`);
  return n;
}

/** The last value of a `# name N` summary line of node's TAP output. */
function count(output: string, name: string): number {
  const all = [...output.matchAll(new RegExp(`^# ${name} (\\d+)$`, 'gm'))];
  return all.length > 0 ? Number(all[all.length - 1]![1]) : 0;
}

/** The children's user + system seconds: the second line `times` printed after `#verbatim-cpu`, or 0. */
function cpuOf(output: string): number {
  const m = /^#verbatim-cpu\n.*\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/m.exec(output);
  if (!m) return 0;
  return Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4]);
}

function runFile(file: string): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    // Through bash, whose `times` then gives the CPU its children used (node, the processes the
    // tests start, the recognisers those start): where the suite's time goes (issue 17 item 10).
    const child = spawn(
      'bash',
      [
        '-c',
        // `times` prints the shell's own time, then its children's (not in a subshell: a subshell has none).
        '"$@"; rc=$?; echo "#verbatim-cpu"; times; exit $rc',
        'bash',
        process.execPath,
        '--import',
        'tsx',
        '--test',
        '--test-reporter=tap',
        '--test-concurrency=1',
        file,
      ],
      // A group of its own: a file that hangs is killed with everything it started.
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let output = '';
    const timer = setTimeout(() => {
      output += `\nnot ok - ${file} did not end within ${FILE_TIMEOUT_S} s and was killed\n`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // ended meanwhile
      }
    }, FILE_TIMEOUT_S * 1000);
    child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({
        file,
        code,
        seconds: (performance.now() - started) / 1000,
        tests: count(output, 'tests'),
        pass: count(output, 'pass'),
        // A file that failed without a failing test (killed, crashed at load) counts as one.
        fail: Math.max(count(output, 'fail'), code === 0 ? 0 : 1),
        skipped: count(output, 'skipped'),
        cpu: cpuOf(output),
        output,
      });
    });
  });
}

/** The processes the tests start run the built CLI (scripts/built-cli.ts): built here when stale. */
function buildCliIfStale(): void {
  if (builtCliIsFresh()) return;
  process.stdout.write('building dist/ (tsc -p tsconfig.build.json): a source is newer than the build\n');
  const r = spawnSync(
    process.execPath,
    [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  if (r.status !== 0) throw new Error('the build failed: the tests would run a stale CLI');
}

async function main(): Promise<void> {
  buildCliIfStale();
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
  const slots = knob('VERBATIM_TEST_SLOTS', 3);
  const browsers = knob('VERBATIM_TEST_BROWSERS', 1);
  const started = performance.now();
  const outcomes: Outcome[] = [];
  const lane = new Map(files.map((f) => [f, laneOf(f)]));
  const waiting = [...files];
  let browsing = 0;
  process.stdout.write(
    `running ${files.length} test files, ${slots} at a time, at most ${browsers} of the ` +
      `${files.filter((f) => lane.get(f) === 'browser').length} browser files at once (${os.cpus().length} CPUs)\n`,
  );
  // Each slot takes the first waiting file it may run: a browser file only while fewer than
  // `browsers` run. A slot that finds only browser files it may not start waits for one to end.
  const sleeping: Array<() => void> = [];
  const wake = () => sleeping.splice(0).forEach((r) => r());
  const slot = async (): Promise<void> => {
    for (;;) {
      const i = waiting.findIndex((f) => lane.get(f) !== 'browser' || browsing < browsers);
      if (i < 0) {
        if (waiting.length === 0) return;
        await new Promise<void>((r) => sleeping.push(r));
        continue;
      }
      const file = waiting.splice(i, 1)[0]!;
      const isBrowser = lane.get(file) === 'browser';
      if (isBrowser) browsing++;
      const o = await runFile(file);
      if (isBrowser) browsing--;
      wake();
      outcomes.push(o);
      const ok = o.code === 0 && o.fail === 0;
      // Each file's whole TAP output in one piece, as it ends, then its line.
      process.stdout.write(`\n# ---- ${o.file}\n${o.output}`);
      process.stdout.write(
        `${ok ? 'ok  ' : 'FAIL'} ${o.file.padEnd(40)} ${String(o.tests).padStart(4)} tests ` +
          `${o.fail > 0 ? `${o.fail} failed ` : ''}${o.seconds.toFixed(1).padStart(7)} s ` +
          `${o.cpu.toFixed(0).padStart(5)} CPU-s\n`,
      );
    }
  };
  await Promise.all(Array.from({ length: slots }, () => slot()));

  const failed = outcomes.filter((o) => o.code !== 0 || o.fail > 0);
  process.stdout.write('\nper file, longest first\n');
  for (const o of [...outcomes].sort((a, b) => b.seconds - a.seconds))
    process.stdout.write(
      `  ${o.code === 0 && o.fail === 0 ? 'ok  ' : 'FAIL'} ${o.file.padEnd(40)} ${String(o.tests).padStart(4)} tests ${o.seconds.toFixed(1).padStart(7)} s ${o.cpu.toFixed(0).padStart(5)} CPU-s\n`,
    );
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
      `# cpu ${outcomes.reduce((a, o) => a + o.cpu, 0).toFixed(0)} s of user + system time in the files' processes (${os.cpus().length} CPUs)`,
      '',
    ].join('\n'),
  );
  process.exitCode = failed.length > 0 ? 1 : 0;
}

await main();
