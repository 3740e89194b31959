"""devstack"""
