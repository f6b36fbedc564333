import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout. Lease tokens never reach a log call (J12); the redaction list is
 * a second line of defence for anything credential-shaped that a caller passes by mistake (S3).
 */
export const REDACTED_KEYS = [
  'token',
  'leaseToken',
  'apiKey',
  'api_key',
  'key_hash',
  'authorization',
  'password',
  'secret',
  'secretAccessKey',
  'signingSecret',
  'webhookSecrets',
  'metricsToken',
];

export function createLogger(level: string, name = 'verbatim', destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    base: { pid: process.pid },
    redact: {
      paths: [
        ...REDACTED_KEYS,
        ...REDACTED_KEYS.map((k) => `*.${k}`),
        'req.headers.authorization',
        'headers.authorization',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
