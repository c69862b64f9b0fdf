#!/bin/bash
# The project's real-Moodle LTI checks, asserted (review 3: ../shared/research/lti-moodle-review-2.md;
# the steps of the harness's drive_review3.py and hostile_review3.py):
#   0. the shared harness (/work/shared/tools/moodle-lti/run_all.sh): Moodle 4.1 from the bare
#      git mirror in MOODLE_GIT, this checkout's grader on localhost:5095, its steps 1-10; its
#      passback results asserted (skip with SKIP_HARNESS=1 when it has just run, servers up)
#   A. deep linking in Moodle's "Select content" dialog (framed); a student's launch lands on
#      the chosen task; the answered picker cannot be answered again
#   B. an embedded activity placed by deep linking: a student submits inside the course
#      page's frame; the grade reaches Moodle; the frame's URL is refused in another browser
#   C. a quiz placed by deep linking, answered and submitted; its grade reaches Moodle
#   D. hostile: the teacher's picker URL in another browser, the frame session's scope and
#      Sign out, captured launches posted from another browser, forged launches
#      (hostile_review3.py)
#   E. dynamic registration: the URL pasted into Manage tools, the tool activated; an embedded
#      activity of the new tool placed by deep linking; student1's earlier best score reaches
#      it without a new submission (one account per LMS person), student2's new submission
#      passes back through the new registration; the same URL pasted again is refused with a
#      reason Moodle shows
#   H. with LTI_HTTPS=1, HTTPS end to end: a local test CA (moodle_lti_tls.sh), Moodle and
#      the grader behind TLS proxies (tls_proxy.py), the grader with ATTN_GRADER_HTTPS and
#      no plain-HTTP LMS URLs; dynamic registration, a deep-linked embedded activity, a
#      submission inside the frame and its passback, all over HTTPS; Secure cookies only
# Run from the checkout:  MOODLE_GIT=<bare git dir> bash scripts/moodle_lti_more.sh
# The grader is the checkout's own (.venv/bin/attn-grader; made with `make install` when a
# fresh clone has none), or GRADER_BIN. Exit status: the number of failed checks.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
HARNESS=${MOODLE_HARNESS:-/work/shared/tools/moodle-lti}
GRADER_BIN=${GRADER_BIN:-$ROOT/.venv/bin/attn-grader}
if [ ! -x "$GRADER_BIN" ]; then
  echo "no grader at $GRADER_BIN: making the checkout's venv (make install)"
  make -C "$ROOT" install >/tmp/lti-make-install.log 2>&1 || { echo "make install failed: /tmp/lti-make-install.log"; exit 1; }
fi
GRADER_PY=$(dirname "$GRADER_BIN")/python
export ATTN_GRADER_INSTANCE_PATH=/tmp/lti/instance ATTN_GRADER_LTI_ALLOW_HTTP=true MOODLE_HARNESS=$HARNESS
PY=/tmp/lti/venv/bin/python
MORE="$PY $HERE/moodle_lti_more.py"
FAILED=0
step() { echo; echo "== $*"; }
sql() { su postgres -c "psql -d moodle -At -c \"$1\""; }
run() { "$@" || FAILED=$((FAILED + 1)); }  # a failed check is counted; the steps go on
expect() {  # expect WHAT ACTUAL WANTED
  if [ "$2" = "$3" ]; then echo "PASS $1: $2"; else echo "FAIL $1: got '$2', wanted '$3'"; FAILED=$((FAILED + 1)); fi
}
last_cmid() { sql "select max(cm.id) from mdl_course_modules cm join mdl_modules m on m.id=cm.module and m.name='lti'"; }
grade() {  # grade CMID USERNAME: Moodle's final grade of that activity for that user, 2 decimals
  sql "select round(gg.finalgrade, 2) from mdl_grade_grades gg join mdl_grade_items gi on gi.id=gg.itemid join mdl_course_modules cm on cm.instance=gi.iteminstance and gi.itemmodule='lti' and gi.itemtype='mod' join mdl_modules m on m.id=cm.module and m.name='lti' join mdl_user u on u.id=gg.userid where cm.id=$1 and u.username='$2'"
}
grade_by_name() { sql "select round(gg.finalgrade, 2) from mdl_grade_grades gg join mdl_grade_items gi on gi.id=gg.itemid join mdl_user u on u.id=gg.userid where gi.itemname='$1' and u.username='$2'"; }
passback() {  # send what the outbox holds now (serve's sender also runs every 5 s)
  "$GRADER_BIN" lti send >/dev/null 2>&1 || true
  sleep "${1:-10}"
}

if [ "${SKIP_HARNESS:-0}" != 1 ] && [ "${LTI_ONLY_HTTPS:-0}" != 1 ]; then
  step "0. the shared harness, as it is (its log: /tmp/lti/run_all.log)"
  mkdir -p /tmp/lti
  (cd "$ROOT" && MOODLE_GIT=${MOODLE_GIT:?set MOODLE_GIT} GRADER_BIN=$GRADER_BIN \
     bash "$HARNESS/run_all.sh") > /tmp/lti/run_all.log 2>&1
  expect "harness ran every step" "$?" 0
  expect "harness: student1's SDPA after the override" "$(grade_by_name 'SDPA (attn-grader)' student1)" 90.00
  expect "harness: student1's answered quiz" "$(grade_by_name 'Self-check quiz' student1)" 1.00
fi
COURSE=$(sql "select id from mdl_course where shortname='ATTN101'")
TYPEID=$(sql "select min(id) from mdl_lti_types")
HARNESS_CMID=$(sql "select min(cm.id) from mdl_course_modules cm join mdl_modules m on m.id=cm.module and m.name='lti'")
echo "course $COURSE, manually registered tool type $TYPEID, the harness's activity cmid $HARNESS_CMID"

if [ "${LTI_ONLY_HTTPS:-0}" != 1 ]; then  # LTI_ONLY_HTTPS=1: the HTTPS leg alone, on a set-up Moodle
step "A. deep linking in Moodle's Select content dialog: 'mha'"
run $MORE dl-dialog --course "$COURSE" --typeid "$TYPEID" --slug mha --state /tmp/lti/dl-mha.json
DL_CMID=$(last_cmid)
expect "student1's launch of the deep-linked activity lands on its task" \
  "$($PY "$HARNESS/drive.py" launch --user student1 --cmid "$DL_CMID" --tag m-a-launch | grep -o '/tasks/mha' | head -1)" /tasks/mha
run $MORE dl-answered --state /tmp/lti/dl-mha.json

step "B. an embedded activity placed by deep linking: submit inside the frame, passback"
run $MORE dl-dialog --course "$COURSE" --typeid "$TYPEID" --slug sdpa --embed
EMB_CMID=$(last_cmid)
run $MORE embed --user student2 --cmid "$EMB_CMID" --submit "$HARNESS/sdpa_correct.py" --expect 100 --copy
passback
expect "Moodle has student2's grade of the embedded activity" "$(grade "$EMB_CMID" student2)" 100.00

step "C. a quiz placed by deep linking, answered, submitted; passback"
run $MORE dl-dialog --course "$COURSE" --typeid "$TYPEID" --slug quiz
Q_CMID=$(last_cmid)
run $MORE quiz --user student2 --cmid "$Q_CMID" --answer "A weighted average of all values" --expect 1
passback
expect "Moodle has student2's quiz grade" "$(grade "$Q_CMID" student2)" 1.00

step "D. hostile tries"
run $MORE copied-picker --course "$COURSE" --typeid "$TYPEID" --slug mha
run $MORE frame-scope --course "$COURSE" --typeid "$TYPEID"
run $MORE captured-launch --cmid "$HARNESS_CMID" --embedded-cmid "$EMB_CMID"
CLIENT=$(sql "select clientid from mdl_lti_types where id=$TYPEID")
HOSTILE=$("$GRADER_PY" "$HARNESS/hostile_review3.py" "$CLIENT" 1 2>&1)
echo "$HOSTILE"
expect "forged launches: every try answered 400" "$(echo "$HOSTILE" | grep -cE '^\[H[0-9]+\] .*: 400 ')" 6
expect "an unregistered issuer's login is not redirected" "$(echo "$HOSTILE" | grep -c '^\[H1\].*Location: None')" 1

step "E. dynamic registration, a deep-linked activity of it, passback through it"
URL=$("$GRADER_BIN" lti registration-url --base-url http://localhost:5095)
run $MORE dynreg --url "$URL" --expect registered
DR_TYPE=$(sql "select max(id) from mdl_lti_types")
expect "a second tool type" "$([ "$DR_TYPE" -gt "$TYPEID" ] && echo yes)" yes
run $MORE dl-dialog --course "$COURSE" --typeid "$DR_TYPE" --slug sdpa --embed
DR_CMID=$(last_cmid)
run $MORE embed --user student1 --cmid "$DR_CMID"  # no submission: the launch sends her best
run $MORE embed --user student2 --cmid "$DR_CMID" --submit "$HARNESS/sdpa_correct.py" --expect 100
passback 15
expect "student1's earlier best reached the new registration's activity" "$(grade "$DR_CMID" student1)" 90.00
expect "student2's grade passed back through the new registration" "$(grade "$DR_CMID" student2)" 100.00
S1=$(sql "select id from mdl_user where username='student1'")
expect "student1 launched the new activity into her account with her earlier work" "$("$GRADER_PY" - "$S1" <<'EOF'
import sys
from sqlalchemy import text
from web.config import load_config
from web.db import get_engine
with get_engine(load_config()["DATABASE_URL"]).connect() as conn:
    people = conn.execute(text("select user_id from lti_users where sub = :sub"),
                          {"sub": sys.argv[1]}).scalars().all()
    work = conn.execute(text("select count(*) from submissions where user_id = :u"),
                        {"u": people[0] if people else -1}).scalar()
print("yes" if len(people) == 1 and work >= 2 else f"accounts {people}, submissions {work}")
EOF
)" yes
run $MORE dynreg --url "$URL" --expect refused
fi

if [ "${LTI_HTTPS:-0}" = 1 ]; then
  step "H. HTTPS end to end: a local CA, Moodle and the grader behind TLS, Secure cookies"
  TLS=/tmp/lti/tls WWW=${MOODLE_WWW:-/tmp/moodle/www}
  bash "$HERE/moodle_lti_tls.sh" "$TLS"
  cp "$TLS/bundle.pem" "$(sed -n "s/^\$CFG->dataroot *= *'\(.*\)';/\1/p" "$WWW/config.php")/moodleorgca.crt"  # Moodle's cURL
  export REQUESTS_CA_BUNDLE=$TLS/bundle.pem  # the grader's requests (JWKS, tokens, scores)
  LTI_TLS_SPKI=$(openssl x509 -in "$TLS/server.crt" -pubkey -noout | openssl pkey -pubin -outform der \
    | openssl dgst -sha256 -binary | base64)
  export LTI_TLS_SPKI  # Chromium trusts that certificate's key (moodle_lti_more.py)
  for pair in 127.0.0.1:8443=127.0.0.1:8800 127.0.0.1:5443=127.0.0.1:5095; do
    setsid "$GRADER_PY" "$HERE/tls_proxy.py" --listen "${pair%%=*}" --to "${pair#*=}" \
      --cert "$TLS/server.crt" --key "$TLS/server.key" >> /tmp/lti/tls-proxy.log 2>&1 &
    echo $! >> /tmp/lti/tls-proxy.pids
  done
  # Moodle at https://127.0.0.1:8443 (a new issuer: to the grader, another LMS)
  sed -i "s#^\$CFG->wwwroot .*#\$CFG->wwwroot   = 'https://127.0.0.1:8443';\n\$CFG->sslproxy = true;\n\$CFG->reverseproxy = true;#" "$WWW/config.php"
  php "$WWW/admin/cli/purge_caches.php"
  # the grader behind its proxy, as deployed: HTTPS on, proxy trusted, no plain-HTTP LMS URLs
  kill -- -"$(cat /tmp/lti/grader.pid)" 2>/dev/null; sleep 5
  export ATTN_GRADER_HTTPS=true ATTN_GRADER_TRUSTED_PROXIES=1 ATTN_GRADER_LTI_ALLOW_HTTP=false \
         ATTN_GRADER_RECONCILE_SECONDS=5
  setsid "$GRADER_BIN" serve --host 127.0.0.1 --port 5095 --workers 1 > /tmp/lti/grader-https.log 2>&1 &
  echo $! > /tmp/lti/grader.pid
  for _ in $(seq 90); do curl -sf --cacert "$TLS/ca.crt" -o /dev/null https://localhost:5443/lti/jwks && break; sleep 1; done
  export MOODLE=https://127.0.0.1:8443 TOOL=https://localhost:5443
  expect "Moodle answers over HTTPS with the test CA's certificate" \
    "$(curl -s --cacert "$TLS/ca.crt" -o /dev/null -w '%{http_code}' "$MOODLE/login/index.php")" 200
  URL=$("$GRADER_BIN" lti registration-url --base-url "$TOOL")
  run $MORE dynreg --url "$URL" --expect registered
  TLS_TYPE=$(sql "select max(id) from mdl_lti_types")
  expect "Moodle's tool type over HTTPS" "$(sql "select substr(baseurl, 1, 8) from mdl_lti_types where id=$TLS_TYPE")" "https://"
  expect "the grader's platform for Moodle over HTTPS" \
    "$("$GRADER_BIN" lti platforms list | grep -c 'https://127.0.0.1:8443')" 1
  run $MORE dl-dialog --course "$COURSE" --typeid "$TLS_TYPE" --slug sdpa --embed
  TLS_CMID=$(last_cmid)
  run $MORE embed --user student2 --cmid "$TLS_CMID" --submit "$HARNESS/sdpa_correct.py" --expect 100 --copy
  passback 15
  expect "passback over HTTPS" "$(grade "$TLS_CMID" student2)" 100.00
  echo "stop the TLS proxies: kill \$(cat /tmp/lti/tls-proxy.pids)"
fi

step "F. Moodle's grader report"
$MORE gradebook --course "$COURSE" | tail -8
echo
echo "failed checks: $FAILED"
exit "$FAILED"
