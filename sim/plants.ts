/**
 * V12: every invariant is shown to catch a planted defect. A plant is a small patch to src/ under
 * sim/plants/ whose header names the invariant that must catch it:
 *
 *     Invariant: V9
 *     What: chunk admission refuses a chunk behind the timeline (409)
 *     Expect: chunk       (optional: a pattern one such violation's subject and detail must match,
 *                          when the invariant could also fire for a reason that is not the plant's)
 *     Seed: 1401          (optional: the seed it runs; default 1401)
 *     Minutes: 0.5        (optional: minutes of faults; default 0.5)
 *
 * `npm run sim -- --plant NAME` copies the repository's tracked files (as they are in the working
 * tree) to a temporary directory, applies the patch there with `git apply`, and runs the seed from
 * that copy with `--expect` the plant's invariant: it exits 0 only when that invariant was
 * violated. A plant that no longer applies is itself a failure (exit 3), never a skip.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Invariant } from './oracle.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const PLANTS = path.join(ROOT, 'sim', 'plants');

export interface Plant {
  name: string;
  file: string;
  invariant: Invariant;
  /** A pattern (case-insensitive) a caught violation's subject and detail must match; null: any. */
  expect: string | null;
  what: string;
  seed: number;
  minutes: number;
}

/** Reads a plant's header (the lines before its first `diff --git`). */
export function parsePlant(name: string, text: string): Omit<Plant, 'file'> {
  const header = text.split(/^diff --git /m)[0] ?? '';
  const field = (key: string) => new RegExp(`^${key}:\\s*(.+)$`, 'm').exec(header)?.[1]?.trim();
  const invariant = field('Invariant');
  if (!invariant || !/^V([1-9]|1[013])$/.test(invariant))
    throw new Error(
      `plant ${name}: its header must name the invariant that catches it (Invariant: V1 … V11, V13)`,
    );
  if (!/^diff --git /m.test(text)) throw new Error(`plant ${name}: no patch in it`);
  return {
    name,
    invariant: invariant as Invariant,
    expect: field('Expect') ?? null,
    what: field('What') ?? '',
    seed: Number(field('Seed') ?? '1401'),
    minutes: Number(field('Minutes') ?? '0.5'),
  };
}

export function listPlants(): Plant[] {
  if (!fs.existsSync(PLANTS)) return [];
  return fs
    .readdirSync(PLANTS)
    .filter((f) => f.endsWith('.patch'))
    .sort()
    .map((f) => {
      const file = path.join(PLANTS, f);
      return { ...parsePlant(f.replace(/\.patch$/, ''), fs.readFileSync(file, 'utf8')), file };
    });
}

/**
 * Whether a run's violations show the plant caught: at least one of the invariant it names (whose
 * subject and detail match the plant's pattern, when it has one).
 */
export function plantCaught(
  expect: Invariant,
  violations: Array<{ invariant: Invariant; subject?: string; detail?: string }>,
  pattern: string | null = null,
): boolean {
  const re = pattern === null ? null : new RegExp(pattern, 'i');
  return violations.some(
    (v) => v.invariant === expect && (re === null || re.test(`${v.subject ?? ''}: ${v.detail ?? ''}`)),
  );
}

export async function runPlant(name: string, argv: string[], say: (line: string) => void): Promise<number> {
  const plant = listPlants().find((p) => p.name === name);
  if (!plant) {
    say(
      `no plant ${name}; the plants are: ${listPlants()
        .map((p) => p.name)
        .join(', ')}`,
    );
    return 2;
  }
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), `verbatim-plant-${name}-`));
  try {
    // The tracked files as they are in the working tree, and the installed modules beside them.
    const files = execFileSync('git', ['-C', ROOT, 'ls-files', '-z'], { encoding: 'utf8' })
      .split('\0')
      .filter(Boolean);
    for (const f of files) {
      const from = path.join(ROOT, f);
      if (!fs.existsSync(from) || fs.lstatSync(from).isSymbolicLink()) continue;
      fs.mkdirSync(path.dirname(path.join(copy, f)), { recursive: true });
      fs.copyFileSync(from, path.join(copy, f));
    }
    fs.symlinkSync(fs.realpathSync(path.join(ROOT, 'node_modules')), path.join(copy, 'node_modules'));
    try {
      execFileSync('git', ['apply', '--verbose', plant.file], { cwd: copy, stdio: 'pipe' });
    } catch (err) {
      const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? String(err);
      say(
        `PLANT DOES NOT APPLY: ${name} (${plant.invariant}) no longer applies to this tree; regenerate ` +
          `sim/plants/${name}.patch against the current src (docs/simulation.md, "Plants").\n${stderr}`,
      );
      return 3;
    }
    // The patched service must at least load: a plant that no longer compiles is a failure of the
    // plant, said as such, not a run whose processes all die at start.
    try {
      execFileSync(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', "await import('./src/app.ts')"],
        {
          cwd: copy,
          stdio: 'pipe',
        },
      );
    } catch (err) {
      const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? String(err);
      say(
        `PLANT DOES NOT LOAD: ${name} applies, but the patched service does not load:\n${stderr.slice(-3000)}`,
      );
      return 3;
    }
    const pass = stripPlantArgs(argv);
    const args = [
      '--import',
      'tsx',
      'sim/run.ts',
      ...(pass.includes('--seed') || pass.includes('--seeds') ? [] : ['--seed', String(plant.seed)]),
      ...(pass.includes('--minutes') ? [] : ['--minutes', String(plant.minutes)]),
      ...pass,
      '--expect',
      plant.invariant,
      ...(plant.expect === null ? [] : ['--expect-match', plant.expect]),
    ];
    say(`plant ${name}: ${plant.what} (must be caught by ${plant.invariant}); running in ${copy}`);
    const started = Date.now();
    const code = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, args, { cwd: copy, stdio: 'inherit' });
      child.on('close', (c) => resolve(c ?? 1));
    });
    say(
      `plant ${name}: ${code === 0 ? `caught by ${plant.invariant}` : `NOT caught by ${plant.invariant}`} ` +
        `(${((Date.now() - started) / 1000).toFixed(0)} s)`,
    );
    return code;
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
}

/** The command line without `--plant NAME` (and `--expect`, which the plant sets). */
function stripPlantArgs(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--plant' || argv[i] === '--expect' || argv[i] === '--expect-match') i++;
    else out.push(argv[i]!);
  }
  return out;
}
