import { ApiError } from "./api-error.js";
import { clear, el } from "./dom.js";

/**
 * Shows an error as the API sent it: status, type (and code), message, the validation list,
 * `retry-after` and the request id. Anything else (a bug, an aborted request) as plain text.
 */
export function showError(box: HTMLElement, err: unknown): void {
  clear(box);
  box.hidden = false;
  if (!(err instanceof ApiError)) {
    box.append(el("strong", { text: "Error" }), " ", err instanceof Error ? err.message : String(err));
    return;
  }
  const status = err.extra.inStream ? "error in the stream" : err.status === 0 ? "no response" : String(err.status);
  const type = err.extra.code !== undefined && err.extra.code !== err.type ? `${err.type} (${err.extra.code})` : err.type;
  box.append(el("strong", { class: "error-status", text: status }), " ", el("code", { class: "error-type", text: type }), " ", err.message);
  if (err.extra.details !== undefined) box.append(el("ul", {}, ...err.extra.details.map((d) => el("li", { text: d }))));
  const meta: string[] = [];
  if (err.extra.retryAfter !== undefined) meta.push(`retry after ${err.extra.retryAfter} s`);
  if (err.extra.requestId !== undefined) meta.push(`x-service-request-id ${err.extra.requestId}`);
  if (meta.length > 0) box.append(el("div", { class: "error-meta", text: meta.join(" · ") }));
}

export function hideError(box: HTMLElement): void {
  clear(box);
  box.hidden = true;
}
