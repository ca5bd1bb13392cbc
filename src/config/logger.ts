/**
 * Structured logs (pino). Never log image bytes or full API keys: request logs carry ids, sizes,
 * codes and timings only, and the redaction list guards the usual header names.
 */
import pino, { type Logger } from 'pino';

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'bgone' },
    redact: { paths: ['authorization', 'headers.authorization', 'key', 'apiKey', 'image', 'body'], censor: '[redacted]' },
  });
}

export type { Logger };
