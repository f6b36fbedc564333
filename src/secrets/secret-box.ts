import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * U7: secrets Verbatim keeps in its database (webhook signing secrets) are sealed with AES-256-GCM
 * under one key: VERBATIM_SECRET_KEY, or, when that is empty, a key made once in the private data
 * dir (`<data dir>/secret-key`, mode 0600). A sealed value reads `sealed:v1:<iv>:<tag>:<data>`;
 * a value without the prefix is one stored before sealing existed, read as it is (and sealed at
 * the next start). Every process must hold the same key: the database keeps a check of the key
 * its secrets were sealed with, and a process with another refuses to start (src/secrets/key-check.ts).
 */

const PREFIX = 'sealed:v1:';

export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('a secret key is 32 bytes');
    this.#key = key;
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return `${PREFIX}${iv.toString('base64url')}:${tag.toString('base64url')}:${data.toString('base64url')}`;
  }

  open(stored: string): string {
    if (!isSealed(stored)) return stored;
    const [iv, tag, data] = stored.slice(PREFIX.length).split(':');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv ?? '', 'base64url'));
    decipher.setAuthTag(Buffer.from(tag ?? '', 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data ?? '', 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  }

  /** What the database keeps to tell this key from another (an HMAC, not the key). */
  check(): string {
    return createHmac('sha256', this.#key).update('verbatim-secret-key-check').digest('base64url');
  }
}

export function isSealed(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

/** The key from its setting (64 hex digits or 44 base64 characters), or the data dir's, made once. */
export function loadSecretKey(setting: string | null, dataDir: string): Buffer {
  if (setting) {
    const key = /^[0-9a-f]{64}$/i.test(setting)
      ? Buffer.from(setting, 'hex')
      : Buffer.from(setting, 'base64');
    if (key.length !== 32)
      throw new Error('VERBATIM_SECRET_KEY must be 32 bytes: 64 hex digits or 44 base64 characters');
    return key;
  }
  const file = path.join(dataDir, 'secret-key');
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    // First start: made once; a process starting at the same moment reads the one that won.
    fs.writeFileSync(file, randomBytes(32).toString('base64'), { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const key = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key (base64)`);
  return key;
}

const boxes = new WeakMap<object, SecretBox>();

/** The box of a loaded configuration (one per config object, like the egress guard). */
export function secretBoxOf(config: { secretKey: string | null; dataDir: string }): SecretBox {
  let box = boxes.get(config);
  if (!box) {
    box = new SecretBox(loadSecretKey(config.secretKey, config.dataDir));
    boxes.set(config, box);
  }
  return box;
}
