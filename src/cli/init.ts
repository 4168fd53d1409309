import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolved.ts';
import { BOOTSTRAP_FILES } from '../agent/context/bootstrap.ts';

/**
 * Templates of the six workspace files. Everything in them is read into the system prompt at every turn,
 * so the comments say what belongs there and the placeholders are short; replace both.
 */
export const WORKSPACE_TEMPLATES: Record<(typeof BOOTSTRAP_FILES)[number], string> = {
  'AGENTS.md': `# Operating instructions

<!-- How the agent works: what it is for, how it answers, what it must never do.
     This file is read into the system prompt at every turn; keep it short and concrete. -->

- Answer in the language the person writes in.
- Be brief by default; give detail when asked.
- Say so when you are unsure, rather than guessing.
- Write durable facts and decisions to memory (memory_write) so they survive compaction.
`,
  'SOUL.md': `# Soul

<!-- Personality and values: tone of voice, humour, what the agent cares about, its boundaries.
     Example: "Warm, direct, a little dry. Never flatters. Pushes back when something looks wrong." -->

Friendly, direct and honest.
`,
  'IDENTITY.md': `# Identity

<!-- Who the agent is: name, role, and how it introduces itself. -->

- Name: Switchboard
- Role: a personal assistant reachable from chat apps and the terminal
`,
  'USER.md': `# About the user

<!-- Who the agent works for: name, time zone, languages, preferences, context worth knowing.
     Everyone who can talk to the agent sees answers shaped by this file. -->

- Name:
- Time zone:
- Preferences:
`,
  'TOOLS.md': `# Tools and environment

<!-- Notes on the tools the agent has (see /tools) and on the environment: which sessions exist,
     conventions for memory notes, anything a tool result may need to be read correctly. -->

- Memory notes go to memory/YYYY-MM-DD.md; search them with memory_search before asking the user again.
`,
  'HEARTBEAT.md': `# Heartbeat

<!-- What to check when the agent runs without a new message (a background continuation of a goal):
     open tasks, follow-ups, things to report. Leave empty when there is nothing. -->
`,
};

/** What `switchboard init` did with one file. */
export interface InitResult {
  file: string;
  action: 'written' | 'kept';
}

/** Writes the templates into every agent's workspace; existing files are kept unless `force`. */
export function initWorkspaces(config: Pick<ResolvedConfig, 'agents'>, options: { force?: boolean } = {}): InitResult[] {
  const results: InitResult[] = [];
  for (const workspace of new Set(config.agents.map((a) => a.workspace))) {
    mkdirSync(path.join(workspace, 'memory'), { recursive: true });
    for (const name of BOOTSTRAP_FILES) {
      const file = path.join(workspace, name);
      if (existsSync(file) && !options.force) {
        results.push({ file, action: 'kept' });
        continue;
      }
      writeFileSync(file, WORKSPACE_TEMPLATES[name]);
      results.push({ file, action: 'written' });
    }
  }
  return results;
}
