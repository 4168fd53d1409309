import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Delivery keys the inbox journal (`<stateDir>/inbox.jsonl`) holds as accepted and not yet done. */
export function pendingInJournal(stateDir: string): string[] {
  const file = path.join(stateDir, 'inbox.jsonl');
  if (!existsSync(file)) return [];
  const pending = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const record = JSON.parse(line) as { op: string; key: string };
    if (record.op === 'in') pending.add(record.key);
    else if (record.op === 'done') pending.delete(record.key);
  }
  return [...pending];
}
