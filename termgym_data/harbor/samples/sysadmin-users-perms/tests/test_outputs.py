import grp
import os
import pwd
import stat


def test_user_and_group():
    alice = pwd.getpwnam("alice")
    assert alice.pw_dir == "/home/alice" and os.path.isdir("/home/alice")
    assert alice.pw_shell == "/bin/bash"
    analysts = grp.getgrnam("analysts")
    assert "alice" in analysts.gr_mem or alice.pw_gid == analysts.gr_gid


def test_directory_owner_and_mode():
    st = os.stat("/srv/reports")
    assert st.st_uid == 0
    assert st.st_gid == grp.getgrnam("analysts").gr_gid
    assert stat.S_IMODE(st.st_mode) == 0o2770


def test_existing_files():
    gid = grp.getgrnam("analysts").gr_gid
    names = sorted(os.listdir("/srv/reports"))
    assert names == ["q1.txt", "q2.txt"]
    for name in names:
        st = os.stat(os.path.join("/srv/reports", name))
        assert st.st_gid == gid and stat.S_IMODE(st.st_mode) == 0o660
