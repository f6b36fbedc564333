/**
 * What an installation setting is. src/config.ts declares each setting once, with `setting()`:
 * its variable, the kind of value it takes (parser and bounds), its default and a line for the
 * README. From that one declaration `loadConfig` parses the environment, `Config` takes its type
 * (`ValuesOf`) and scripts/settings-table.ts writes the README's settings tables. This module
 * reads no environment itself: it is handed one.
 */
import path from 'node:path';

/** A setting was given a value it does not take; the message names the variable. */
export class ConfigError extends Error {}

/** The text another setting was given, or its default, by its variable (for a kind that depends on one). */
export type ReadSetting = (env: string) => string;

/** How a setting's text becomes its value, and what the README says it accepts. */
export interface Kind<T> {
  /** e.g. `seconds ≥ 0.05`, `` `on`, `off` `` */
  readonly values: string;
  /** Throws ConfigError naming `env` when the text is not a value of this kind. */
  parse(text: string, env: string, read: ReadSetting): T;
}

export interface SettingDeclaration<T> {
  /** The environment variable. */
  env: string;
  kind: Kind<T>;
  /** The text used when the variable is unset or empty; it goes through `kind` like a given one. */
  default?: string;
  /** One line for the README: what it sets, and the requirement it serves, e.g. `(J2)`. */
  help: string;
}

export class Setting<T> {
  readonly env: string;
  readonly kind: Kind<T>;
  readonly default: string;
  readonly help: string;

  constructor(
    declaration: SettingDeclaration<T>,
    /** The README table it is listed in; undefined until `group()` places it. */
    readonly group?: string,
    /** Set by Verbatim or its tests, not by an operator: listed apart in the README. */
    readonly internal = false,
  ) {
    this.env = declaration.env;
    this.kind = declaration.kind;
    this.default = declaration.default ?? '';
    this.help = declaration.help;
  }

  /** The text this setting has in `env`: the default when unset or empty. */
  textIn(env: Env): string {
    const value = env[this.env];
    return value === undefined || value === '' ? this.default : value;
  }
}

export function setting<T>(declaration: SettingDeclaration<T>): Setting<T> {
  return new Setting(declaration);
}

/** Settings, nested as the values they make are (`requestLimits.maxJsonBytes`). */
export interface SettingTree {
  readonly [key: string]: Setting<unknown> | SettingTree;
}

/** The values a tree of settings parses to: the shape of `Config`. */
export type ValuesOf<Tree> = {
  -readonly [K in keyof Tree]: Tree[K] extends Setting<infer T> ? T : ValuesOf<Tree[K]>;
};

export type Env = Readonly<Record<string, string | undefined>>;

function mapSettings<Tree extends SettingTree>(
  tree: Tree,
  f: (s: Setting<unknown>) => Setting<unknown>,
): Tree {
  const out: Record<string, unknown> = {};
  for (const [key, node] of Object.entries(tree)) {
    out[key] = node instanceof Setting ? f(node) : mapSettings(node, f);
  }
  return out as Tree;
}

/** Lists these settings in the README table titled `title` (in declaration order). */
export function group<Tree extends SettingTree>(title: string, tree: Tree): Tree {
  return mapSettings(tree, (s) => new Setting(s, title, s.internal));
}

/** Marks settings that Verbatim or its tests set, never an operator. */
export function internal<Tree extends SettingTree>(tree: Tree): Tree {
  return mapSettings(tree, (s) => new Setting(s, undefined, true));
}

/** Every setting of the tree, in declaration order. */
export function listSettings(tree: SettingTree): Setting<unknown>[] {
  return Object.values(tree).flatMap((node) => (node instanceof Setting ? [node] : listSettings(node)));
}

/**
 * P2: every setting `env` gives a value its kind refuses, each with its message (where
 * `parseSettings` stops at the first). A setting that reads another is judged with that one as given.
 */
export function settingErrors(tree: SettingTree, env: Env): Array<{ env: string; message: string }> {
  const settings = listSettings(tree);
  const byEnv = new Map(settings.map((s) => [s.env, s]));
  const read: ReadSetting = (name) => byEnv.get(name)?.textIn(env) ?? '';
  const errors: Array<{ env: string; message: string }> = [];
  for (const s of settings) {
    try {
      s.kind.parse(s.textIn(env), s.env, read);
    } catch (err) {
      errors.push({ env: s.env, message: err instanceof Error ? err.message : String(err) });
    }
  }
  return errors;
}

/** Parses every setting of the tree from `env`, in declaration order; the first bad value throws. */
export function parseSettings<Tree extends SettingTree>(tree: Tree, env: Env): ValuesOf<Tree> {
  const byEnv = new Map(listSettings(tree).map((s) => [s.env, s]));
  const read: ReadSetting = (name) => {
    const other = byEnv.get(name);
    if (!other) throw new Error(`no setting reads ${name}`);
    return other.textIn(env);
  };
  const walk = (node: SettingTree): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(node).map(([key, child]) => [
        key,
        child instanceof Setting ? child.kind.parse(child.textIn(env), child.env, read) : walk(child),
      ]),
    );
  return walk(tree) as ValuesOf<Tree>;
}

// The kinds of value. Their messages name the variable and say what it takes.

/** Free text, kept as given; `label` is what the README calls it (URL, path, secret…). */
export function text(label: string): Kind<string> {
  return { values: label, parse: (value) => value };
}

/** Free text where empty means "none". */
export function optionalText(label: string): Kind<string | null> {
  return { values: `${label}, or empty`, parse: (value) => (value === '' ? null : value) };
}

/** A directory, made absolute against the working directory. */
export function directory(): Kind<string> {
  return { values: 'path', parse: (value) => path.resolve(value) };
}

function numberAtLeast(text: string, env: string, min: number): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < min) {
    throw new ConfigError(`${env} must be a number >= ${min}, got "${text}"`);
  }
  return value;
}

export function wholeNumber(bounds: { min: number }): Kind<number> {
  return {
    values: `whole number ≥ ${bounds.min}`,
    parse(text, env) {
      const value = numberAtLeast(text, env, bounds.min);
      if (!Number.isInteger(value)) throw new ConfigError(`${env} must be a whole number`);
      return value;
    },
  };
}

const MS_PER_UNIT = { seconds: 1000, hours: 3_600_000, days: 86_400_000 } as const;

/**
 * A duration given in `unit` (fractions allowed), parsed to whole milliseconds; `below`, in the
 * same unit, is an exclusive upper bound.
 */
export function duration(
  unit: keyof typeof MS_PER_UNIT,
  bounds: { min: number; below?: number },
): Kind<number> {
  const below = bounds.below;
  return {
    values: `${unit} ≥ ${bounds.min}${below === undefined ? '' : `, below ${below}`}`,
    parse(text, env) {
      // Rounded to the millisecond before scaling, as the hours and days settings always were.
      const ms = Math.round(numberAtLeast(text, env, bounds.min) * 1000) * (MS_PER_UNIT[unit] / 1000);
      if (below !== undefined && ms >= below * MS_PER_UNIT[unit]) {
        throw new ConfigError(`${env} must be below ${below}`);
      }
      return ms;
    },
  };
}

export function oneOf<const T extends string>(choices: readonly T[]): Kind<T> {
  return {
    values: choices.map((c) => `\`${c}\``).join(', '),
    parse(text, env) {
      if (!(choices as readonly string[]).includes(text)) {
        throw new ConfigError(`${env} must be one of ${choices.join(', ')}, got "${text}"`);
      }
      return text as T;
    },
  };
}

/** A switch written as one of two words, e.g. `on`/`off`. */
export function onOff(on: string, off: string): Kind<boolean> {
  const words = oneOf([on, off]);
  return { values: words.values, parse: (text, env, read) => words.parse(text, env, read) === on };
}

/** Comma-separated items, trimmed, empty ones dropped. */
export function commaList(label: string, options: { lowercase?: boolean } = {}): Kind<string[]> {
  return {
    values: `comma-separated ${label}`,
    parse: (text) =>
      text
        .split(',')
        .map((x) => (options.lowercase ? x.trim().toLowerCase() : x.trim()))
        .filter((x) => x.length > 0),
  };
}
