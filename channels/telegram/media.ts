import { downloadOf, downloadStopped, networkReason, tooLargeDownload } from '../../src/core/media-download.ts';
import { GrammyError, type Api } from 'grammy';
import { MediaFetchError } from '../../src/core/errors.ts';
import type { Attachment, MediaDownload } from '../../src/core/message.ts';
import { withoutToken } from './start-error.ts';

/** Telegram lets a bot download files of at most 20 MB (`getFile` refuses bigger ones: "file is too big"). */
export const TELEGRAM_DOWNLOAD_LIMIT = 20 * 1024 * 1024;

/** The account's Bot API root and token (the file URL holds the token: it never reaches a log or an error). */
export interface TelegramFileSource {
  apiRoot: string;
  botToken: string;
}

/**
 * Opens the bytes of a Telegram attachment (SPEC §15): `getFile` for its path, then
 * `GET <apiRoot>/file/bot<token>/<file_path>`, streamed. A file over `maxBytes`, as the message or `getFile`
 * announced it, is refused before anything is downloaded (`too_large`); a refusal, a non-2xx answer or a
 * broken connection is `download_failed`, an aborted `signal` `timeout`. No message of these errors holds
 * the token, and the fetch errors (whose text may hold the URL) are not attached as causes.
 */
export async function fetchTelegramMedia(
  api: Api, source: TelegramFileSource, attachment: Attachment, options: { signal: AbortSignal; maxBytes: number },
): Promise<MediaDownload> {
  const { signal, maxBytes } = options;
  const clean = (text: string) => withoutToken(text, source.botToken);
  const tooLarge = (size: number) => tooLargeDownload('The Telegram file', size, maxBytes);
  if (attachment.size !== undefined && attachment.size > maxBytes) throw tooLarge(attachment.size);
  let file: Awaited<ReturnType<Api['getFile']>>;
  try {
    file = await api.getFile(attachment.fileId, signal as Parameters<Api['getFile']>[1]);
  } catch (error) {
    if (signal.aborted) throw downloadStopped('The Telegram file');
    if (error instanceof GrammyError && /too big/i.test(error.description)) {
      throw new MediaFetchError('too_large', `Telegram refused the file: ${clean(error.description)} (bots may download at most 20 MB).`);
    }
    const reason = error instanceof GrammyError ? `${error.error_code}: ${error.description}` : (error as Error)?.message ?? String(error);
    throw new MediaFetchError('download_failed', `Telegram getFile failed (${clean(reason)}).`);
  }
  if (file.file_size !== undefined && file.file_size > maxBytes) throw tooLarge(file.file_size);
  if (!file.file_path) throw new MediaFetchError('download_failed', 'Telegram getFile gave no file path (the file is no longer available).');

  const path = file.file_path.split('/').map(encodeURIComponent).join('/');
  const root = (source.apiRoot || 'https://api.telegram.org').replace(/\/+$/, '');
  let response: Response;
  try {
    // No redirects: the URL carries the token, and Telegram serves files directly.
    response = await fetch(`${root}/file/bot${source.botToken}/${path}`, { signal, redirect: 'manual' });
  } catch (error) {
    if (signal.aborted) throw downloadStopped('The Telegram file');
    throw new MediaFetchError('download_failed', `The Telegram file download failed (${clean(networkReason(error))}).`);
  }
  return downloadOf(response, {
    maxBytes, signal, what: 'The Telegram file', refused: (status) => `Telegram answered ${status} to the file download.`,
    mime: attachment.mimeType, size: file.file_size, clean,
  });
}
