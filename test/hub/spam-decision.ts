// The one decision the hub tests ask a served model: is this state spam?

/** POST /v1/systemone with one yes/no/unknown question; the status and the body as text. */
export async function askSpam(baseUrl: string, headers: Record<string, string>, model: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${baseUrl}/v1/systemone`, {
    method: "POST",
    headers,
    body: JSON.stringify({ model, state: "Win a free cruise now!!!", questions: { spam: { type: "noul" } } }),
  });
  return { status: res.status, text: await res.text() };
}
