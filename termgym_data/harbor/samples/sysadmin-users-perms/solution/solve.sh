#!/bin/bash
set -euo pipefail
groupadd analysts
useradd --create-home --home-dir /home/alice --shell /bin/bash --groups analysts alice
chown root:analysts /srv/reports
chmod 2770 /srv/reports
chgrp analysts /srv/reports/*
chmod 0660 /srv/reports/*
