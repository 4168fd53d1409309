import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';

/** The workspace files injected into every system prompt, in this order (SPEC §4, §5). */
export const BOOTSTRAP_FILES = ['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md', 'TOOLS.md', 'HEARTBEAT.md'] as const;

/** Share of `bootstrapMaxChars` kept from the start and from the end of a file that is too long. */
export const HEAD_SHARE = 0.7;
export const TAIL_SHARE = 0.2;

/** One bootstrap file as it goes into the prompt. */
export interface BootstrapFile {
  name: string;
  path: string;
  status: 'ok' | 'truncated' | 'missing';
  /** Characters in the file (0 when missing). */
  rawChars: number;
  /** Characters that go into the prompt, marker included (0 when missing). */
  injectedChars: number;
  /** What goes into the prompt ('' when missing). */
  content: string;
  /** Why it was cut: its own limit, or the total budget of all files. */
  cutBy?: 'file' | 'total';
}

/** Limits from `agents.defaults`. */
export interface BootstrapLimits {
  maxChars: number;
  totalMaxChars: number;
}

/**
 * Cuts a text to `limit` characters, keeping its first 70% and last 20% of the limit around a visible
 * marker that names the file. The marker fits in the remaining 10%; for tiny limits head and tail shrink
 * so that the result never exceeds the limit.
 */
export function truncateMiddle(text: string, limit: number, name: string): string {
  if (text.length <= limit) return text;
  let head = Math.floor(limit * HEAD_SHARE);
  let tail = Math.floor(limit * TAIL_SHARE);
  const marker = (h: number, t: number) => `\n[…truncated ${name}: ${text.length - h - t} of ${text.length} chars omitted…]\n`;
  // The widest marker (most omitted digits), so that the result never exceeds the limit.
  const markerRoom = marker(0, 0).length;
  if (head + tail + markerRoom > limit) {
    const room = Math.max(0, limit - markerRoom);
    head = Math.floor((room * HEAD_SHARE) / (HEAD_SHARE + TAIL_SHARE));
    tail = room - head;
  }
  head = safeEnd(text, head);
  const tailStart = safeStart(text, text.length - tail);
  const kept = `${text.slice(0, head)}${marker(head, text.length - tailStart)}${text.slice(tailStart)}`;
  return kept.length <= limit ? kept : '';
}

/** Applies the per-file limit, then the total budget (files later in the order give way first). */
export function applyBootstrapLimits(files: { name: string; path: string; raw?: string }[], limits: BootstrapLimits): BootstrapFile[] {
  let remaining = limits.totalMaxChars;
  return files.map((file): BootstrapFile => {
    if (file.raw === undefined) return { name: file.name, path: file.path, status: 'missing', rawChars: 0, injectedChars: 0, content: '' };
    const raw = file.raw;
    let content = truncateMiddle(raw, limits.maxChars, file.name);
    let cutBy: BootstrapFile['cutBy'] = content !== raw ? 'file' : undefined;
    if (content.length > remaining) {
      content = truncateMiddle(raw, remaining, file.name);
      cutBy = 'total';
    }
    remaining -= content.length;
    return {
      name: file.name, path: file.path, status: cutBy ? 'truncated' : 'ok', rawChars: raw.length, injectedChars: content.length, content,
      ...(cutBy ? { cutBy } : {}),
    };
  });
}

/** The bootstrap section of the system prompt. Deterministic: same files, same bytes. */
export function renderBootstrap(files: readonly BootstrapFile[], limits: BootstrapLimits): string {
  if (files.length === 0) return '';
  const parts = ['# Workspace files', 'These files from your workspace are loaded into every conversation: AGENTS.md holds your operating instructions, SOUL.md your persona, IDENTITY.md who you are, USER.md who the user is, TOOLS.md notes on your tools, HEARTBEAT.md your periodic checklist.'];
  for (const f of files) {
    parts.push(`## ${f.name}`);
    if (f.status === 'missing') parts.push(`[missing: ${f.name} is not in the workspace]`);
    else if (f.content === '' && f.rawChars > 0) parts.push(`[omitted: ${f.name} (${f.rawChars} chars) does not fit the ${limits.totalMaxChars}-character budget of the workspace files]`);
    else parts.push(f.content || '(empty)');
  }
  return parts.join('\n\n');
}

/** How long a loaded workspace is trusted without a change event (a safety net for file systems without events). */
const MAX_TRUST_MS = 30_000;

interface WorkspaceState {
  files?: BootstrapFile[];
  limitsKey?: string;
  loadedAt: number;
  dirty: boolean;
  watcher?: FSWatcher;
  /** While the folder is missing: a watch on its nearest existing ancestor, for the folder's creation. */
  ancestorWatcher?: FSWatcher;
}

/**
 * Reads the bootstrap files of a workspace. A loaded workspace is reused until its folder reports a change
 * (fs.watch), so a turn costs no file system calls; a file is re-read only when its size or mtime changed.
 * A missing folder is remembered the same way: its nearest existing ancestor is watched until it appears.
 */
export class BootstrapLoader {
  private readonly cache = new Map<string, { mtimeMs: number; size: number; text: string }>();
  private readonly workspaces = new Map<string, WorkspaceState>();

  async load(workspace: string, limits: BootstrapLimits): Promise<BootstrapFile[]> {
    const state = this.workspaces.get(workspace) ?? { loadedAt: 0, dirty: true };
    this.workspaces.set(workspace, state);
    const limitsKey = `${limits.maxChars}/${limits.totalMaxChars}`;
    if (state.files && !state.dirty && state.limitsKey === limitsKey && performance.now() - state.loadedAt < MAX_TRUST_MS) return state.files;
    state.dirty = false;
    state.loadedAt = performance.now();
    let files: { name: string; path: string; raw?: string }[];
    if (!(await isDirectory(workspace))) {
      // A watcher of a removed folder would never fire again.
      closeWatcher(state, 'watcher');
      await this.watchForCreation(workspace, state);
      files = BOOTSTRAP_FILES.map((name) => ({ name, path: path.join(workspace, name) }));
    } else {
      closeWatcher(state, 'ancestorWatcher');
      this.watch(workspace, state);
      files = await Promise.all(BOOTSTRAP_FILES.map(async (name) => {
        const file = path.join(workspace, name);
        return { name, path: file, raw: await this.read(file) };
      }));
    }
    // A watcher that could not be set up leaves the state dirty, so the next turn looks again.
    if (!state.watcher && !state.ancestorWatcher) state.dirty = true;
    state.files = applyBootstrapLimits(files, limits);
    state.limitsKey = limitsKey;
    return state.files;
  }

  /** Stops watching every workspace. */
  close(): void {
    for (const state of this.workspaces.values()) {
      closeWatcher(state, 'watcher');
      closeWatcher(state, 'ancestorWatcher');
    }
    this.workspaces.clear();
  }

  /** Watches the nearest existing ancestor of a missing folder for the next step toward it. */
  private async watchForCreation(workspace: string, state: WorkspaceState): Promise<void> {
    if (state.ancestorWatcher) return;
    let child = path.resolve(workspace);
    let parent = path.dirname(child);
    while (parent !== child && !(await isDirectory(parent))) {
      child = parent;
      parent = path.dirname(parent);
    }
    // Another turn may have set it up meanwhile.
    if (parent === child || state.ancestorWatcher) return;
    const name = path.basename(child);
    try {
      const watcher = watch(parent, { persistent: false }, (_event, filename) => {
        if (filename !== null && filename.toString() !== name) return;
        // The next turn looks again (and then watches the folder itself, or the next missing step).
        state.dirty = true;
        closeWatcher(state, 'ancestorWatcher');
      });
      watcher.on('error', () => {
        state.dirty = true;
        closeWatcher(state, 'ancestorWatcher');
      });
      state.ancestorWatcher = watcher;
    } catch {
      state.ancestorWatcher = undefined;
      return;
    }
    // Created between the look and the watch: no event will tell.
    if (await isDirectory(child)) {
      state.dirty = true;
      closeWatcher(state, 'ancestorWatcher');
    }
  }

  private watch(workspace: string, state: WorkspaceState): void {
    if (state.watcher) return;
    try {
      state.watcher = watch(workspace, { persistent: false }, () => { state.dirty = true; });
      state.watcher.on('error', () => {
        closeWatcher(state, 'watcher');
        state.dirty = true;
      });
    } catch {
      state.watcher = undefined;
    }
  }

  private async read(file: string): Promise<string | undefined> {
    let info;
    try {
      info = await stat(file);
    } catch {
      this.cache.delete(file);
      return undefined;
    }
    if (!info.isFile()) return undefined;
    const cached = this.cache.get(file);
    if (cached && cached.mtimeMs === info.mtimeMs && cached.size === info.size) return cached.text;
    try {
      const text = (await readFile(file, 'utf8')).replace(/\r\n/g, '\n');
      this.cache.set(file, { mtimeMs: info.mtimeMs, size: info.size, text });
      return text;
    } catch {
      return undefined;
    }
  }
}

function closeWatcher(state: WorkspaceState, which: 'watcher' | 'ancestorWatcher'): void {
  const watcher = state[which];
  state[which] = undefined;
  watcher?.close();
}

async function isDirectory(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch {
    return false;
  }
}

/** An index that does not split a surrogate pair when used as a slice end. */
function safeEnd(text: string, index: number): number {
  if (index <= 0 || index >= text.length) return Math.max(0, Math.min(index, text.length));
  const code = text.charCodeAt(index - 1);
  return code >= 0xd800 && code <= 0xdbff ? index - 1 : index;
}

/** An index that does not split a surrogate pair when used as a slice start. */
function safeStart(text: string, index: number): number {
  if (index <= 0 || index >= text.length) return Math.max(0, Math.min(index, text.length));
  const code = text.charCodeAt(index);
  return code >= 0xdc00 && code <= 0xdfff ? index + 1 : index;
}
