/**
 * The `remote` and `token` fields of a reader entry: a reader served by a
 * `weft reader --listen HOST:PORT` process on another machine (or another
 * process here, e.g. one per GPU). Its model is whatever that process loaded;
 * `model` in the entry is then only a label until the reader reports its own.
 */
import { InvalidRequestError } from '../../core/errors.ts';
import { splitHostPort } from './remote_frames.ts';

export function parseRemote(o: Record<string, unknown>, spec: { model: string }): { remote?: string; remoteToken?: string; model?: string } {
  const remote = o.remote;
  const token = o.token ?? o.remoteToken;
  if (remote === undefined || remote === null) {
    if (token !== undefined && token !== null) throw new InvalidRequestError('invalid_reader_config', 'token applies to remote readers only (set remote: host:port)', { field: 'token' });
    return {};
  }
  if (typeof remote !== 'string') throw new InvalidRequestError('invalid_reader_config', 'remote must be "host:port"', { field: 'remote' });
  try {
    if (splitHostPort(remote).port === 0) throw new Error('port 0');
  } catch {
    throw new InvalidRequestError('invalid_reader_config', `remote must be "host:port" with a port in [1, 65535], got "${remote}"`, { field: 'remote' });
  }
  if (token !== undefined && token !== null && (typeof token !== 'string' || token.length === 0)) {
    throw new InvalidRequestError('invalid_reader_config', 'token must be a non-empty string', { field: 'token' });
  }
  const explicitModel = o.model ?? o.model_name ?? o.modelName;
  return {
    remote,
    ...(typeof token === 'string' ? { remoteToken: token } : {}),
    ...(explicitModel === undefined ? { model: `remote:${remote}` } : { model: spec.model }),
  };
}
