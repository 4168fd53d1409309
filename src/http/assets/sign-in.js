// The sign-in page: exchanges the typed token for the dashboard's session cookie, then loads the dashboard.
const form = document.getElementById('sign-in-form');
const error = document.getElementById('sign-in-error');
const input = document.getElementById('token');

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const button = form.querySelector('button');
  button.disabled = true;
  error.hidden = true;
  try {
    // With this header a refused sign-in answers 200 { signedIn: false, error }: no failed request in the console.
    const response = await fetch('/dashboard/sign-in', {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-switchboard-sign-in': 'page' }, body: JSON.stringify({ token: input.value }),
    });
    const body = await response.json().catch(() => ({}));
    if (response.ok && body.signedIn) {
      location.replace('/');
      return;
    }
    error.textContent = body.error?.message ?? `Sign-in failed (${response.status}).`;
  } catch (e) {
    error.textContent = `The gateway did not answer (${e.message}).`;
  }
  error.hidden = false;
  button.disabled = false;
  input.select();
});
