#!/bin/bash
# The real-Moodle LTI steps the shared harness lacks, after the harness itself:
#   1. the harness (/work/shared/tools/moodle-lti/run_all.sh): Moodle 4.1 set up from the
#      bare git mirror in MOODLE_GIT, this checkout's grader on localhost:5095, its steps 1-10
#      (skip with SKIP_HARNESS=1 when it has just run and left both servers up)
#   2. deep linking through Moodle's own "Select content" dialog (framed), then a student's
#      launch of the created activity landing on the chosen task
#   3. an answered quiz attempt, placed through the dialog, reaching Moodle's gradebook
#   4. an embedded (framed) activity: the student submits inside the course page and sees
#      the grade, which reaches Moodle
#   5. dynamic registration: the tool's registration URL pasted into Manage tools, the tool
#      activated, an activity of it launched
# Run from the checkout: MOODLE_GIT=<bare git dir> bash scripts/moodle_lti_more.sh
# The script prints; the closing summary lists each step's evidence.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
HARNESS=${MOODLE_HARNESS:-/work/shared/tools/moodle-lti}
GRADER_BIN=${GRADER_BIN:-$ROOT/.venv/bin/attn-grader}
export ATTN_GRADER_INSTANCE_PATH=/tmp/lti/instance ATTN_GRADER_LTI_ALLOW_HTTP=true
PY=/tmp/lti/venv/bin/python
MORE="$PY $HERE/moodle_lti_more.py"
step() { echo; echo "== $*"; }
sql() { su postgres -c "psql -d moodle -At -c \"$1\""; }
grades() { sql "select gi.itemname, u.username, gg.finalgrade from mdl_grade_grades gg join mdl_grade_items gi on gi.id=gg.itemid join mdl_user u on u.id=gg.userid where gi.itemtype='mod' and gg.finalgrade is not null order by gi.id, u.username"; }
last_cmid() { sql "select max(cm.id) from mdl_course_modules cm join mdl_modules m on m.id=cm.module and m.name='lti'"; }

if [ "${SKIP_HARNESS:-0}" != 1 ]; then
  step "0. the shared harness, as it is (its log: /tmp/lti/run_all.log)"
  (cd "$ROOT" && MOODLE_GIT=${MOODLE_GIT:?set MOODLE_GIT} GRADER_BIN=$GRADER_BIN \
     bash "$HARNESS/run_all.sh") > /tmp/lti/run_all.log 2>&1 \
     && echo "harness: every step ran" || echo "harness: stopped early, exit $? (see /tmp/lti/run_all.log)"
  grep -E "^== |landed on|submission status|^\[|browser says|after save|after quiz|active members|\|[0-9.]+$" /tmp/lti/run_all.log | cut -c1-220
fi
COURSE=$(sql "select id from mdl_course where shortname='ATTN101'")
TYPEID=$(sql "select min(id) from mdl_lti_types")
echo "course $COURSE, manually registered tool type $TYPEID"

step "A. deep linking inside Moodle's Select content dialog (framed): 'mha'"
$MORE dialog-deep-link --course "$COURSE" --typeid "$TYPEID" --slug mha
DL_CMID=$(last_cmid)
$PY "$HARNESS/drive.py" launch --user student1 --cmid "$DL_CMID" --tag 63-dialog-activity \
  | grep -E "landed on"

step "B. answered quiz: placed through the dialog, answered, submitted; grade to Moodle"
$MORE dialog-deep-link --course "$COURSE" --typeid "$TYPEID" --slug quiz
Q_CMID=$(last_cmid)
$MORE quiz --user student2 --cmid "$Q_CMID" --answer "A weighted average of all values"
sleep 15
"$GRADER_BIN" lti outbox
grades

step "C. embedded activity (in the course page's iframe): submit, grade, passback"
$MORE add-embedded --course "$COURSE" --typeid "$TYPEID" --slug sdpa
EMB_CMID=$(last_cmid)
$MORE embedded --user student2 --cmid "$EMB_CMID" --submit "$HARNESS/sdpa_correct.py"
sleep 15
grades

step "D. dynamic registration: the tool's URL pasted into Moodle's Manage tools"
URL=$("$GRADER_BIN" lti registration-url --base-url http://localhost:5095)
echo "registration URL: ${URL:0:60}..."
$MORE dynreg --url "$URL"
"$GRADER_BIN" lti platforms list
DR_TYPE=$(sql "select max(id) from mdl_lti_types")
echo "tool type made by dynamic registration: $DR_TYPE ($(sql "select name||', state '||state||', client '||clientid from mdl_lti_types where id=$DR_TYPE"))"
$PY "$HARNESS/drive.py" add-activity --course "$COURSE" --typeid "$DR_TYPE" --slug decoder_attention \
  --name "Decoder attention (dynamic registration)" | grep -E "errors"
$MORE embedded --user student1 --cmid "$(last_cmid)"

step "E. Moodle's grader report"
$PY "$HARNESS/drive.py" gradebook --course "$COURSE" --tag 90-gradebook-more | tail -8
