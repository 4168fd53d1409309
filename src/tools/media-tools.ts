import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolErrorResult } from './registry.ts';
import { defineTool, type Tool } from './tool.ts';

/** Options of {@link mediaTools}. */
export interface MediaToolOptions {
  /** `media.maxBytes`: the largest file `send_file` sends. */
  maxBytes: number;
}

/** Why `send_file` refused: the model reads the message, the code says which rule it hit. */
export type SendFileRefusal = 'no_chat' | 'outside_workspace' | 'not_found' | 'not_a_file' | 'too_large';

/** A `send_file` call that was refused; answered to the model as its message (outcome `error`). */
export class SendFileError extends ToolErrorResult {
  readonly refusal: SendFileRefusal;
  constructor(refusal: SendFileRefusal, message: string) {
    super(`Error: ${message}`);
    this.name = 'SendFileError';
    this.refusal = refusal;
  }
}

/** Mime types by lower-case extension; anything else is `application/octet-stream`. */
const MIME_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp', '.svg': 'image/svg+xml',
  '.pdf': 'application/pdf', '.txt': 'text/plain', '.md': 'text/markdown', '.csv': 'text/csv', '.html': 'text/html', '.htm': 'text/html',
  '.json': 'application/json', '.xml': 'application/xml', '.yaml': 'application/yaml', '.yml': 'application/yaml',
  '.zip': 'application/zip', '.gz': 'application/gzip', '.tar': 'application/x-tar',
  '.mp3': 'audio/mpeg', '.ogg': 'audio/ogg', '.oga': 'audio/ogg', '.wav': 'audio/wav', '.m4a': 'audio/mp4',
  '.mp4': 'video/mp4', '.webm': 'video/webm', '.mov': 'video/quicktime',
  '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  '.pptx': 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
};

/** The mime type of a file name, from its extension (default `application/octet-stream`). */
export function mimeOfName(name: string): string {
  return MIME_TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/** `send_file` (SPEC §15, `group:media`): sends a file of the agent's workspace to the turn's chat. */
export function mediaTools(options: MediaToolOptions): Tool[] {
  const limit = formatBytes(options.maxBytes);
  return [
    defineTool({
      name: 'send_file',
      group: 'group:media',
      description: `Send a file from your workspace to this chat as an upload (at most ${limit}). The path is relative to the workspace.`,
      schema: z.object({
        path: z.string().trim().min(1).max(4096).describe('the file, relative to the workspace'),
        caption: z.string().max(1024).optional().describe('text shown with the file'),
      }),
      async run({ path: wanted, caption }, ctx) {
        if (!ctx.sendFile) throw new SendFileError('no_chat', 'this chat cannot receive files.');
        const real = await workspaceFile(ctx.workspace, wanted);
        const info = await stat(real);
        if (!info.isFile()) throw new SendFileError('not_a_file', `"${wanted}" is ${info.isDirectory() ? 'a directory' : 'not a regular file'}; send_file sends one file.`);
        if (info.size > options.maxBytes) {
          throw new SendFileError('too_large', `"${wanted}" is ${formatBytes(info.size)} (${info.size} bytes); at most ${limit} (${options.maxBytes} bytes, media.maxBytes) can be sent.`);
        }
        const file = { path: real, name: path.basename(real), mime: mimeOfName(real), size: info.size };
        await ctx.sendFile(file, caption || undefined);
        return { status: 'sent', name: file.name, mime: file.mime, size: file.size };
      },
    }),
  ];
}

/**
 * The real path of `wanted` (relative to the workspace, or absolute inside it), refused when it lies outside the
 * workspace as written (`..`, another absolute path) or once symbolic links are followed, or does not exist.
 * A path outside is refused before anything is looked up there, so a refusal tells nothing about it.
 */
async function workspaceFile(workspace: string, wanted: string): Promise<string> {
  const outside = () => new SendFileError('outside_workspace', `"${wanted}" is outside the workspace; only files in the workspace can be sent.`);
  const root = path.resolve(workspace);
  const rootReal = await realpath(root).catch(() => undefined);
  if (!rootReal) throw new SendFileError('not_found', `there is no file "${wanted}" in the workspace (the workspace does not exist yet).`);
  const candidate = path.resolve(root, wanted);
  if (!within(root, candidate) && !within(rootReal, candidate)) throw outside();
  let real: string;
  try {
    real = await realpath(candidate);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') {
      throw new SendFileError('not_found', `there is no file "${wanted}" in the workspace.`);
    }
    throw error;
  }
  if (!within(rootReal, real)) throw outside();
  return real;
}

/** Whether `target` is `root` or below it (both absolute and normalized). */
function within(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Number((bytes / (1024 * 1024)).toFixed(1))} MB`;
  if (bytes >= 1024) return `${Number((bytes / 1024).toFixed(1))} KB`;
  return `${bytes} bytes`;
}
