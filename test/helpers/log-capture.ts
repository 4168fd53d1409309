import { PassThrough } from 'node:stream';
import { createLogger, type Logger } from '../../src/core/logger.ts';

/** One JSON line the logger wrote. */
export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A real logger whose lines a test reads back, parsed and in order, as they are written. */
export function capturingLogger(level = 'debug'): { logger: Logger; lines: LogLine[] } {
  const out = new PassThrough();
  const lines: LogLine[] = [];
  out.on('data', (chunk: Buffer) => { for (const l of chunk.toString().trim().split('\n')) lines.push(JSON.parse(l) as LogLine); });
  return { logger: createLogger({ level, destination: out }), lines };
}
